"""The package's shape, read from its source: data flows one way (no import circle among
the modules' imports, at most nine floors of them), builder modules import each other at
module level (only cli.py may defer one, for start-up time), only the engine module talks to
docker-py, the CLI only parses and prints (in under 300 lines), there is one error family,
and docs/explanation/architecture.md's module table names every module."""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import NamedTuple

import builder
from builder import errors

PACKAGE = Path(builder.__file__).parent
ROOT = PACKAGE.parent
MODULES = {p: ".".join(("builder", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
           for p in PACKAGE.rglob("*.py")}
MAX_FLOORS = 9


class Import(NamedTuple):
    """One name an import statement may load: `from a.b import c` gives `a.b` and `a.b.c`
    (c may be a submodule), relative imports resolved to absolute names."""
    module: str
    line: int
    nested: bool  # inside a function, class or lambda, not run when the module loads


def _is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:`."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk_imports(path: Path, with_type_only: bool = False) -> list[Import]:
    """Every import in the file, at any depth. Imports under `if TYPE_CHECKING:` are
    type-only (never run) and left out unless with_type_only."""
    name = MODULES[path]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, nested: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(a.name, node.lineno, nested) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: the file's package, then one package up per extra dot
                base = ".".join(p for p in (package.rsplit(".", node.level - 1)[0], base) if p)
            found.append(Import(base, node.lineno, nested))
            found.extend(Import(f"{base}.{a.name}", node.lineno, nested) for a in node.names if a.name != "*")
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not with_type_only:
            children: list[ast.AST] = list(node.orelse)
        else:
            children = list(ast.iter_child_nodes(node))
        inner = nested or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
        for child in children:
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), False)
    return found


def _builder_deps(path: Path) -> set[str]:
    """The builder modules loading this file runs or may run (any depth, not type-only):
    each imported name and the packages above it, where it is a module of ours."""
    deps: set[str] = set()
    for imp in _walk_imports(path):
        parts = imp.module.split(".")
        deps |= {m for m in (".".join(parts[:n]) for n in range(1, len(parts) + 1)) if m in MODULES.values()}
    return deps - {MODULES[path]}


def _graph() -> dict[str, set[str]]:
    """Module -> the builder modules it imports."""
    return {name: _builder_deps(path) for path, name in MODULES.items()}


def _longest_chains(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each module's longest import chain down to floor 1 (its floor is the chain's length).
    An edge closing a circle is left out here; test_no_import_circle reports circles. Of
    equal chains, one through a module is shown rather than one ending at a package."""
    packages = {name for path, name in MODULES.items() if path.name == "__init__.py"}
    chains: dict[str, list[str]] = {}

    def chain(node: str, trail: frozenset[str]) -> list[str]:
        if node not in chains:
            below = [chain(n, trail | {node}) for n in sorted(graph.get(node, ()), key=lambda n: (n in packages, n))
                     if n not in trail | {node}]
            chains[node] = [node, *max(below, key=len, default=[])]
        return chains[node]

    for name in sorted(graph):
        chain(name, frozenset())
    return chains


def test_no_import_circle() -> None:
    """Data flows one way: no circle among the modules' imports, nested ones included
    (a deferred import is still a dependency); type-only imports do not count."""
    graph = _graph()
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


def test_builder_imports_sit_at_module_level() -> None:
    """A builder import inside a function hides a dependency (and often a circle) from a
    reader of the module's head. Only cli.py may defer one, for the CLI's start-up time."""
    found = {(path.relative_to(ROOT), i.line) for path in MODULES if path != PACKAGE / "cli.py"
             for i in _walk_imports(path) if i.nested and (i.module == "builder" or i.module.startswith("builder."))}
    offenders = [f"{file}:{line}" for file, line in sorted(found)]
    assert offenders == [], "builder imports inside a function or class:\n" + "\n".join(offenders)


def test_the_import_graph_has_few_floors() -> None:
    """A module importing no builder module is floor 1, any other one floor above the
    highest it imports. More than nine floors means layers that only pass calls along."""
    chains = _longest_chains(_graph())
    longest = max(sorted(chains.values()), key=len)
    assert len(longest) <= MAX_FLOORS, \
        f"{len(longest)} floors (at most {MAX_FLOORS}): " + " -> ".join(longest)


def test_the_architecture_doc_names_every_module() -> None:
    """docs/explanation/architecture.md's module table is the map a newcomer reads first: every module
    of builder/ appears in a row's first column, and no row names a module that is gone."""
    doc = (ROOT / "docs" / "explanation" / "architecture.md").read_text(encoding="utf-8")
    named = {n for line in doc.splitlines() if line.startswith("|") and line.count("|") >= 2
             for n in re.findall(r"`([^`/]+\.py)`", line.split("|")[1])}
    files = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    missing, stale = sorted(files - named), sorted(named - files)
    assert (missing, stale) == ([], []), \
        f"modules missing from the table: {missing}; table entries naming no module: {stale}"


def test_only_the_engine_module_imports_docker() -> None:
    """docker-py stays behind the Engine protocol; type-only imports count too."""
    users = sorted(name for path, name in MODULES.items()
                   if any(i.module == "docker" or i.module.startswith("docker.")
                          for i in _walk_imports(path, with_type_only=True)))
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
