"""The catalog's schema, declared once (builder/catalog/schema.py): every mistake of a private
catalog in one run, each with its file and key path, and `builder catalog schema`'s JSON Schema,
which accepts every shipped release file and refuses a key the catalog does not have."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builder import catalog

from .conftest import GOOD

ROOT = Path(__file__).resolve().parents[2]


def builder(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "builder.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env or {**os.environ},
    )


# Five different mistakes, in two files, each where a catalog author makes it.
FIVE = {
    "30.01.yaml": GOOD.replace('python: "3.10"', 'pyhton: "3.10"')  # a typo'd key (and so
    .replace("build:\n", "build:\n  xla: maybe\n")  # python missing)
    .replace('{version: "2.14.1"}', '{version: "2.14.1", api: 3}'),
    "30.02.yaml": GOOD.replace('"30.01"', '"30.02"').replace("offline: {debian: bookworm", "offline: {debian: buster"),
}
EXPECTED = [
    "30.01.yaml: pyhton: unknown key (allowed: ",
    "30.01.yaml: python: missing required field",
    "30.01.yaml: build.xla: must be a boolean (true or false), got 'maybe'",
    "30.01.yaml: variants.tf2-py3.framework.api: must be 1 or 2, got 3",
    "30.02.yaml: base.offline.debian: unknown Debian suite 'buster'",
]


def test_five_mistakes_are_five_problem_lines_in_one_run(make_catalog):
    directory = make_catalog(FIVE)
    result = builder("releases", env={**os.environ, "BUILDER_CATALOG": str(directory)})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "error: invalid release catalog:", lines
    problems = [line.strip() for line in lines[1:]]
    assert len(problems) == 5, problems
    for expected in EXPECTED:
        assert sum(p.startswith(expected) for p in problems) == 1, (expected, problems)


def test_every_problem_is_one_line_with_a_path(make_catalog):
    with pytest.raises(catalog.CatalogError) as caught:
        catalog.load(make_catalog(FIVE))
    assert all(p.key and "\n" not in str(p) for p in caught.value.problems)


@pytest.fixture(scope="module")
def schema() -> dict:
    result = builder("catalog", "schema")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_schema_has_a_title_and_says_files_are_partial(schema):
    assert schema["title"] and "after" not in schema["title"]
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert schema["required"] == ["release"] and "only `release` is required" in schema["description"]


@pytest.mark.parametrize("path", sorted(catalog.RELEASES_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_the_schema_accepts_every_shipped_release_file(schema, path):
    jsonschema = pytest.importorskip("jsonschema")
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(path.read_text())))
    assert errors == [], [(list(e.path), e.message) for e in errors]


@pytest.mark.parametrize(
    "document,where",
    [
        ({"release": "30.01", "pyhton": "3.10"}, []),
        ({"release": "30.01", "build": {"ccs": ["8.0"]}}, ["build"]),
        (
            {"release": "30.01", "variants": {"tf2-py3": {"framework": {"version": "2.14.1", "vers": 1}}}},
            ["variants", "tf2-py3", "framework"],
        ),
    ],
)
def test_the_schema_refuses_an_unknown_key(schema, document, where):
    jsonschema = pytest.importorskip("jsonschema")
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(document))
    assert errors
    found = []  # the errors and, under an anyOf (a value or null), the reasons of each choice
    while errors:
        error = errors.pop()
        found.append(error)
        errors += error.context or []
    assert any(
        list(e.absolute_path) == where and "Additional properties are not allowed" in e.message for e in found
    ), [(list(e.absolute_path), e.message) for e in found]


def test_a_partial_file_passes_the_schema_and_null_removes(schema):
    """A child names only what differs; null removes a parent's key, a variant included."""
    jsonschema = pytest.importorskip("jsonschema")
    child = {
        "release": "30.02",
        "parent": "30.01",
        "horovod": None,
        "variants": {"tf1-py3": None},
        "dali": "absent: no wheel for this CUDA",
    }
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(child)) == []
    assert list(jsonschema.Draft202012Validator(schema).iter_errors({"parent": "30.01"}))  # release: always


def test_a_misspelled_key_set_to_null_in_a_root_file_is_refused(make_catalog):
    """`null` removes a key, but a key no model knows is refused even when null: in a file
    without a parent there is nothing it could remove, so it is a typo to point out."""
    common = (catalog.RELEASES_DIR / "_common.yaml").read_text(encoding="utf-8")
    common = common.replace("build:\n", "build:\n  nvbuldopts: null\n", 1) + "bogus: null\n"
    directory = make_catalog({"_common.yaml": common, "30.01.yaml": GOOD}, with_common=False)
    proc = builder("releases", env={**os.environ, "BUILDER_CATALOG": str(directory)})
    assert proc.returncode == 2, proc.stdout
    assert "  _common.yaml: bogus: unknown key (allowed: " in proc.stderr, proc.stderr
    assert "  _common.yaml: build.nvbuldopts: unknown key (allowed: " in proc.stderr, proc.stderr
