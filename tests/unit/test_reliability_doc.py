"""docs/RELIABILITY.md names the test of each case: every test it names exists (its file,
and its function, found with ast). Forms: `unit/test_x.py::test_name`, `integration/...`,
`tests/...` and `builder/...` paths, a file alone, `::test_name` (the file named last),
`...[param]` (the function named last, another parameter), `name[param]` (the function),
and `same` in a table's test column (the row above's tests)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "RELIABILITY.md"
PREFIXES = {"unit/": "tests/unit/", "integration/": "tests/integration/", "tests/": "tests/", "builder/": "builder/"}
# A backticked test reference: a path to a test file with an optional ::name[param],
# a ::name continuation, or ...[param].
REFERENCE = re.compile(
    r"`((?:unit|integration|tests|builder)/[\w/.-]*test_\w*\.py(?:::[\w\[\]\-.,]+)?"
    r"|::\w+(?:\[[^`\]]*\])?|\.\.\.\[[^`\]]*\])`"
)


@functools.cache
def functions(path: Path) -> frozenset[str]:
    """Names of the test file's functions: module level, and Class::method."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {
                f"{node.name}::{n.name}" for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
    return frozenset(names)


def file_of(ref: str) -> Path:
    prefix = next(p for p in PREFIXES if ref.startswith(p))
    return ROOT / (PREFIXES[prefix] + ref[len(prefix) :])


def references(text: str) -> list[tuple[int, str, str | None]]:
    """(line, file, function or None) for every test the text names, continuations resolved."""
    found: list[tuple[int, str, str | None]] = []
    last_file = last_function = None
    previous_row: list[tuple[int, str, str | None]] = []
    for number, line in enumerate(text.splitlines(), 1):
        row: list[tuple[int, str, str | None]] = []
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if cells and re.fullmatch(r"same(,.*)?", cells[-1]):
            assert previous_row, f"RELIABILITY.md line {number}: 'same' with no row of tests above it"
            row += previous_row
        for m in REFERENCE.finditer(line):
            ref = m.group(1)
            if ref.startswith("..."):
                assert last_function, f"RELIABILITY.md line {number}: {ref} with no test named before it"
                row.append((number, last_file, last_function))
                continue
            if ref.startswith("::"):
                assert last_file, f"RELIABILITY.md line {number}: {ref} with no file named before it"
                path, name = last_file, ref[2:]
            else:
                path, _, name = ref.partition("::")
            name = name.split("[", 1)[0] or None
            last_file, last_function = path, name
            row.append((number, path, name))
        found += [r for r in row if r not in found]  # `same` names them again
        if cells and row:
            previous_row = row
    return found


def problems(text: str) -> list[str]:
    out = []
    for number, ref, name in references(text):
        path = file_of(ref)
        if not path.is_file():
            out.append(f"line {number}: {ref}: no such file")
        elif name and name not in functions(path):
            out.append(f"line {number}: {ref}::{name}: no such test in {path.relative_to(ROOT)}")
    return out


def test_every_test_the_reliability_doc_names_exists():
    text = DOC.read_text(encoding="utf-8")
    assert len(references(text)) > 100  # the parser still finds the doc's references
    assert problems(text) == []


def test_the_parser_resolves_continuations_and_finds_stale_names():
    doc = (
        "| case | what | test |\n| --- | --- | --- |\n"
        "| a | x | `unit/test_reliability_doc.py::test_every_test_the_reliability_doc_names_exists`, "
        "`::test_gone` |\n"
        "| b | y | same |\n"
        "| c | z | `...[SIGTERM-143]`, `unit/test_nothing_here.py`, "
        "`unit/test_reliability_doc.py::references[x]` |\n"
    )
    refs = references(doc)  # row b's `same` resolves to row a's tests, already listed
    assert [(n, name) for n, _, name in refs] == [
        (3, "test_every_test_the_reliability_doc_names_exists"),
        (3, "test_gone"),
        (5, "test_gone"),
        (5, None),
        (5, "references"),
    ]
    assert problems(doc) == [
        "line 3: unit/test_reliability_doc.py::test_gone: no such test in tests/unit/test_reliability_doc.py",
        "line 5: unit/test_reliability_doc.py::test_gone: no such test in tests/unit/test_reliability_doc.py",
        "line 5: unit/test_nothing_here.py: no such file",
    ]
