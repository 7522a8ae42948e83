"""The integration tests import builder names inside their functions, where a rename reaches them
only after an hour of building. Every `from builder... import name` in tests/ is resolved here,
in the quick tier, so a moved name fails in seconds."""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def builder_imports() -> tuple[tuple[str, int, str, str], ...]:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if "data" in path.relative_to(TESTS).parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "builder" or node.module.startswith("builder."):
                    for alias in node.names:
                        found.append((str(path.relative_to(TESTS)), node.lineno, node.module, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("builder."):
                        found.append((str(path.relative_to(TESTS)), node.lineno, alias.name, ""))
    return tuple(found)


def test_the_scan_sees_the_imports_made_inside_test_functions():
    where = {(f, m, n) for f, _, m, n in builder_imports()}
    assert ("integration/test_engine.py", "builder.cli.doctor_report", "NAME_WIDTH") in where


@pytest.mark.parametrize("module", sorted({m for _, _, m, _ in builder_imports()}))
def test_every_builder_name_the_tests_import_exists(module: str):
    mod = importlib.import_module(module)
    missing = []
    for file, line, m, name in builder_imports():
        if m != module or not name or name == "*":
            continue
        if hasattr(mod, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")
        except ModuleNotFoundError:
            missing.append(f"{file}:{line}: {module} has no {name}")
    assert not missing, "\n".join(missing)
