"""How `builder build` travels through the package: `run_build` of a 21.08 plan (planned
before the trace starts) on the in-memory engine of the unit tests, traced call by call.
Prints one JSON line:

- modules_entered: the builder modules the run executes code of;
- switches: calls from one builder module into another;
- climbs: such calls from a module into one on a higher floor of the import graph (top-
  level imports; floor 1 imports no builder module), i.e. a call back up the layers;
- renders / plan_calls: templates rendered (calls of template_env) and calls into plan.py
  during the run (a plan that is complete needs neither);
- floors: the import graph's height.

    python3 bench/flow.py
"""
from __future__ import annotations

import ast
import collections
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def floors() -> dict[str, int]:
    """Each builder module's floor from its top-level imports."""
    package = ROOT / "builder"
    names = {p.stem for p in package.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        found = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("builder"):
                targets = [a.name for a in node.names] if node.module == "builder" else [node.module.split(".")[1]]
                found |= {t for t in targets if t in names}
            elif isinstance(node, ast.Import):
                found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("builder.")}
        graph[path.stem] = found - {path.stem}
    memo: dict[str, int] = {}

    def floor(m: str) -> int:
        if m not in memo:
            memo[m] = 0  # a circle counts as flat rather than recursing forever
            memo[m] = 1 + max((floor(t) for t in graph[m]), default=0)
        return memo[m]

    return {f"builder.{m}": floor(m) for m in graph}


def main() -> None:
    os.environ["BUILDER_CACHE_DIR"] = tempfile.mkdtemp(prefix="flow-")
    from builder import catalog, run
    from builder import plan as planning
    from builder.engine.buildsettings import BuildSettings
    from builder.render.base_recipe import BaseRecipe
    from tests.unit.fake_engine import FakeEngine
    from tests.unit.test_orchestration import answers

    cat = catalog.load()
    engine = FakeEngine()
    engine.add_image(BaseRecipe.for_release(cat.get("21.08")).tag)
    engine.run_handler = answers
    level = floors()
    stack: list[str | None] = []
    entered: set[str] = set()
    counts = collections.Counter()

    def module_of(frame) -> str | None:
        name = frame.f_globals.get("__name__", "")
        return name if name in level else None

    def profile(frame, event, arg) -> None:
        if event == "call":
            module = module_of(frame)
            caller = next((m for m in reversed(stack) if m), None)
            stack.append(module)
            if module is None:
                return
            entered.add(module)
            if frame.f_code.co_name == "template_env":  # every template is rendered through it
                counts["renders"] += 1
            if module == "builder.plan":
                counts["plan_calls"] += 1
            if caller and caller != module:
                counts["switches"] += 1
                counts["climbs"] += level[module] > level[caller]
        elif event == "return" and stack:
            stack.pop()

    plan = planning.plan_build(cat, planning.BuildArgs(release="21.08", build_id="t1", base="offline",
                                                       cuda_cc="5.2,6.0,6.1,7.0,7.5,8.0,8.6"))
    sys.setprofile(profile)
    try:
        run.run_build(plan, lambda: engine, BuildSettings(), quiet=True,
                      out=run.Output(result=lambda s: None, say=lambda s: None))
    finally:
        sys.setprofile(None)
    print(json.dumps({"modules_entered": len(entered), "switches": counts["switches"], "climbs": counts["climbs"],
                      "renders": counts["renders"], "plan_calls": counts["plan_calls"],
                      "floors": max(level.values()), "modules": sorted(m.split(".")[1] for m in entered)}))


if __name__ == "__main__":
    main()
