"""The package's shape, read from its source: data flows one way (no import circle among
the modules' top-level imports), only the engine module talks to docker-py, the CLI only
parses and prints (in under 300 lines), and there is one error family."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import builder
from builder import errors

PACKAGE = Path(builder.__file__).parent
MODULES = {p: ".".join(("builder", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
           for p in PACKAGE.rglob("*.py")}


def _imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module == "builder":  # from builder import x, y
                found |= {f"builder.{a.name}" for a in node.names}
    return found


def test_no_import_circle():
    graph = {name: {m for m in _imports(path, top_level_only=True) if m in MODULES.values() and m != name}
             for path, name in MODULES.items()}
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join(trail[trail.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_only_the_engine_module_imports_docker():
    users = sorted(name for path, name in MODULES.items()
                   if any(m == "docker" or m.startswith("docker.") for m in _imports(path, top_level_only=False)))
    assert users == ["builder.engine"]


def test_the_cli_holds_no_orchestration():
    """Commands hand plans to builder.run: the CLI module neither builds, tags, pushes
    nor renders files itself."""
    source = (PACKAGE / "cli.py").read_text()
    for call in (".build(", ".tag(", ".push(", "buildcontext.write", "ensure_base(", "write_atomic("):
        assert call not in source, call
    tree = ast.parse(source)
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        body = fn.body[1:] if ast.get_docstring(fn) else fn.body
        lines = body[-1].end_lineno - body[0].lineno + 1
        assert lines <= 30, f"{fn.name}: {lines} lines"


def test_the_cli_stays_small():
    """Parsing and printing fit in under 300 lines; logic that grows goes to the module
    owning it (plan, run, entry, options, ...), not into cli.py."""
    lines = len((PACKAGE / "cli.py").read_text().splitlines())
    assert lines < 300, f"cli.py has {lines} lines"


def test_one_error_family():
    """Every exception class the builder defines descends from BuilderError. Aside: cuda_arch's
    ArchError (that module also runs inside images, without the builder) and the engine's
    EngineError (the engine's refusal, which its callers always turn into one of the family
    with their context)."""
    import importlib

    strays = []
    for name in MODULES.values():
        if name.startswith("builder.conformance") or name in ("builder.image_report", "builder.cuda_arch"):
            continue  # these run inside images or under pytest, without the builder's CLI
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name \
                    and not issubclass(obj, errors.BuilderError) and obj.__name__ != "EngineError" \
                    and not name == "builder.catalog":
                strays.append(f"{name}.{obj.__name__}")
    assert strays == []
    for kind, code in ((errors.UserError, 2), (errors.BuildFailure, 1)):
        assert kind.exit_code == code
    assert errors.Interrupted(2).exit_code == 130 and errors.Interrupted(15).exit_code == 143
