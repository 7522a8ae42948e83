"""The package's shape, read from its source: the stages import each other one way (the
import-linter contracts in pyproject.toml: layers, docker-py only in the engine package,
what runs in images on its own), and a deliberate violation breaks them; no import circle
among modules; builder modules import each other at module level (only the CLI's main
module may defer one, for start-up time); what runs in images is standard library only;
the CLI only parses and prints; there is one error family; and
docs/explanation/architecture.md's module table names every module."""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import builder
from builder import components
from builder.core import errors

PACKAGE = Path(builder.__file__).parent
ROOT = PACKAGE.parent
# What a component copies into images (its FILES: JupyterLab's server settings, report
# scripts) runs there, not in the builder: no module of the builder's.
IN_IMAGE_FILES = {c.directory() / name for c in components.REGISTRY for name in c.FILES}
MODULES = {
    p: ".".join(("builder", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
    for p in PACKAGE.rglob("*.py")
    if p not in IN_IMAGE_FILES
}
CLI_MAIN = PACKAGE / "cli" / "main.py"
LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")


class Import(NamedTuple):
    """One name an import statement may load: `from a.b import c` gives `a.b` and `a.b.c`
    (c may be a submodule), relative imports resolved to absolute names."""

    module: str
    line: int
    nested: bool  # inside a function, class or lambda, not run when the module loads


def _is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:`."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


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
    own = MODULES[path]
    # the packages above a module are loaded before it: an edge to them is no circle
    return {d for d in deps if not own.startswith(d + ".")} - {own}


def _graph() -> dict[str, set[str]]:
    """Module -> the builder modules it imports."""
    return {name: _builder_deps(path) for path, name in MODULES.items()}


def test_no_import_circle() -> None:
    """Data flows one way: no circle among the modules' imports, nested ones included
    (a deferred import is still a dependency); type-only imports do not count."""
    graph = _graph()
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join(trail[trail.index(nxt) :] + [nxt]))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_builder_imports_sit_at_module_level() -> None:
    """A builder import inside a function hides a dependency (and often a circle) from a
    reader of the module's head. Only the CLI's main module may defer one, for start-up time."""
    found = {
        (path.relative_to(ROOT), i.line)
        for path in MODULES
        if path != CLI_MAIN
        for i in _walk_imports(path)
        if i.nested and (i.module == "builder" or i.module.startswith("builder."))
    }
    offenders = [f"{file}:{line}" for file, line in sorted(found)]
    assert offenders == [], "builder imports inside a function or class:\n" + "\n".join(offenders)


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the `builder` package found first on the path from ROOT."""
    return subprocess.run(
        [LINT_IMPORTS, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_import_contracts_hold() -> None:
    """pyproject.toml's [tool.importlinter] contracts: the stages' layers, docker-py behind
    the engine package, and in_image importing nothing of the builder or beyond Python."""
    proc = _lint_imports(ROOT)
    assert proc.returncode == 0 and "0 broken" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_a_deliberate_violation_breaks_the_contracts(tmp_path: Path) -> None:
    """The rules are live: in a copy of the package, the core importing the CLI, the plan
    importing docker-py, in_image importing the core and the CLI reaching past the runs into
    the engine each break their contract."""
    copy = tmp_path / "builder"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "locks", "releases"))
    for rel, line in (
        ("core/errors.py", "from builder.cli import main"),
        ("plan/__init__.py", "import docker"),
        ("in_image/cuda_arch.py", "from builder.core import errors"),
        ("cli/main.py", "from builder.engine import buildx"),
    ):
        with (copy / rel).open("a", encoding="utf-8") as f:
            f.write(f"\n{line}\n")
    proc = _lint_imports(tmp_path)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "4 broken" in proc.stdout, proc.stdout[-3000:]
    for shown in (
        "builder.core.errors -> builder.cli.main",
        "builder.plan is not allowed to import docker",
        "builder.in_image is not allowed to import builder.core",
        "builder.cli.main is not allowed to import builder.engine",
    ):
        assert shown in proc.stdout, shown


def test_what_runs_in_images_is_standard_library_only() -> None:
    """in_image/ is copied into images next to nvbuild.sh and runs without the builder or
    any package of ours: every module-level import is the standard library's or a sibling in
    in_image/ (functions probe the image's own packages, tensorflow and the rest)."""
    siblings = {p.stem for p in (PACKAGE / "in_image").glob("*.py")}
    found = sorted(
        f"{path.relative_to(ROOT)}:{i.line} {i.module}"
        for path in (PACKAGE / "in_image").glob("*.py")
        for i in _walk_imports(path, with_type_only=True)
        if not i.nested
        and i.module.split(".")[0] not in sys.stdlib_module_names
        and i.module.split(".")[0] not in siblings
        and not i.module.startswith("builder.in_image")
        and i.module != "builder"
    )
    assert found == []


def test_the_cli_holds_no_orchestration() -> None:
    """Commands hand plans to builder.run: the CLI's main module neither builds, tags,
    pushes nor renders files itself."""
    source = CLI_MAIN.read_text(encoding="utf-8")
    for call in (".build(", ".tag(", ".push(", "buildcontext.write", "ensure_base(", "write_atomic("):
        assert call not in source, call


def test_one_error_family():
    """Every exception class the builder defines descends from BuilderError. Aside: cuda_arch's
    ArchError (that module also runs inside images, without the builder) and the engine's
    EngineError (the engine's refusal, which its callers always turn into one of the family
    with their context)."""
    import importlib

    strays = []
    for name in MODULES.values():
        if (
            name.startswith("builder.image.conformance")
            or name.endswith("__main__")
            or name.startswith("builder.in_image.")
        ):
            continue  # these run inside images or under pytest, without the builder's CLI
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == name
                and not issubclass(obj, errors.BuilderError)
                and obj.__name__ != "EngineError"
                and name not in ("builder.catalog", "builder.catalog.yaml_loader")
            ):  # yaml's own signal
                strays.append(f"{name}.{obj.__name__}")
    assert strays == []
    for kind, code in ((errors.UserError, 2), (errors.BuildFailure, 1)):
        assert kind.exit_code == code
    assert errors.Interrupted(2).exit_code == 130 and errors.Interrupted(15).exit_code == 143


def test_the_architecture_doc_names_every_module() -> None:
    """docs/explanation/architecture.md's module table is the map a newcomer reads first: every
    module of builder/ (by its path below builder/; the conformance suite and each component's
    folder aside) appears in a
    row's first column, and no row names a module that is gone."""
    doc = (ROOT / "docs" / "explanation" / "architecture.md").read_text(encoding="utf-8")
    named = {
        n
        for line in doc.splitlines()
        if line.startswith("|") and line.count("|") >= 2
        for n in re.findall(r"`([^`]+\.py)`", line.split("|")[1])
    }
    # a component's folder is one row (`components/NAME/`): adding one never edits this page
    files = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "conformance" not in p.relative_to(PACKAGE).parts
        and not (p.relative_to(PACKAGE).parts[0] == "components" and len(p.relative_to(PACKAGE).parts) > 2)
    }
    assert "`components/NAME/`" in doc
    missing, stale = sorted(files - named), sorted(named - files)
    assert (missing, stale) == ([], []), (
        f"modules missing from the table: {missing}; table entries naming no module: {stale}"
    )
