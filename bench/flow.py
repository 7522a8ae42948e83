"""How `builder build` travels through the package: `run_build` of a 21.08 plan (planned
before the trace starts) on the in-memory engine of the unit tests, traced call by call.
Prints one JSON line:

- modules_entered: the builder modules the run executes code of;
- switches: calls from one builder module into another;
- climbs: such calls from a stage into a higher one (the layers of pyproject.toml's
  import contract "stages": cli on top, in_image at the bottom), i.e. a call back up the
  layers (through a callback: imports cannot go up);
- renders / plan_calls: templates rendered (calls of template_env) and calls into the plan
  package during the run (a plan that is complete needs neither);
- stages: how many layers the contract has.

    python3 bench/flow.py
"""

from __future__ import annotations

import collections
import json
import os
import sys
import tempfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def stage_levels() -> dict[str, int]:
    """Each stage package's level in the "stages" layers contract (1 at the bottom)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "stages")
    layers = contract["layers"]
    return {pkg.strip(): len(layers) - i for i, layer in enumerate(layers) for pkg in layer.split("|")}


def stage_of(module: str, levels: dict[str, int]) -> str | None:
    """The stage package a builder module belongs to (builder.X or below it)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and ".".join(parts[:2]) in levels else None


def main() -> None:
    os.environ["BUILDER_CACHE_DIR"] = tempfile.mkdtemp(prefix="flow-")
    from builder import catalog, run
    from builder import plan as planning
    from builder.engine import ProgressMode
    from builder.engine.buildsettings import BuildSettings
    from builder.render.base_recipe import BaseRecipe
    from tests.unit.fake_engine import FakeEngine
    from tests.unit.test_orchestration import answers

    cat = catalog.load()
    engine = FakeEngine()
    engine.add_image(BaseRecipe.for_release(cat.get("21.08")).tag)
    engine.run_handler = answers
    levels = stage_levels()
    stack: list[str | None] = []
    entered: set[str] = set()
    counts = collections.Counter()

    def module_of(frame) -> str | None:
        name = frame.f_globals.get("__name__", "")
        return name if stage_of(name, levels) else None

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
            if module.startswith("builder.plan"):
                counts["plan_calls"] += 1
            if caller and caller != module:
                counts["switches"] += 1
                counts["climbs"] += levels[stage_of(module, levels)] > levels[stage_of(caller, levels)]
        elif event == "return" and stack:
            stack.pop()

    plan = planning.plan_build(
        cat, planning.BuildArgs(release="21.08", build_id="t1", base="offline", cuda_cc="5.2,6.0,6.1,7.0,7.5,8.0,8.6")
    )
    sys.setprofile(profile)
    try:
        run.run_build(
            plan,
            lambda: engine,
            BuildSettings(),
            progress=ProgressMode.QUIET,
            out=run.Output(result=lambda s: None, say=lambda s: None),
        )
    finally:
        sys.setprofile(None)
    print(
        json.dumps(
            {
                "modules_entered": len(entered),
                "switches": counts["switches"],
                "climbs": counts["climbs"],
                "renders": counts["renders"],
                "plan_calls": counts["plan_calls"],
                "stages": max(levels.values()),
                "modules": sorted(m.removeprefix("builder.") for m in entered),
            }
        )
    )


if __name__ == "__main__":
    main()
