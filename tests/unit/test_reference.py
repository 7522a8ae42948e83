"""The reference pages are generated from the code and must not drift from it:
docs/reference/cli.md and catalog.md equal a fresh `python3 -m builder.cli.reference`, and the
catalog schema they are written from (`builder/catalog/catalog_schema.py`) agrees with the
validator (`builder/catalog/__init__.py`) both ways: a catalog holding every described field
loads, and at every level the validator's own list of allowed keys is the schema's."""
from __future__ import annotations

import ast
import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builder import catalog
from builder.catalog import catalog_schema
from builder.cli import reference
from builder.core.errors import CatalogError

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN = "zz_not_a_field"


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_the_committed_reference_equals_a_fresh_generation(name):
    committed = (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
    assert committed == reference.pages()[name], \
        f"docs/reference/{name} drifted from the code: run python3 -m builder.cli.reference"


def test_the_check_mode_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)
    assert reference.main([]) == 0 and reference.main(["--check"]) == 0
    (tmp_path / "cli.md").write_text("stale\n")
    assert reference.main(["--check"]) == 1
    assert reference.main(["--bogus"]) == 2


def test_the_cli_page_names_every_command_and_option():
    """A spot check that the walk reaches subcommands and options from the help itself."""
    text = reference.cli_markdown()
    for needle in ("### `builder build`", "#### `builder cache serve`", "`--layer-cache <str>`",
                   "`-r, --release <str>`", "| `--compression <str>` | `gzip` |"):
        assert needle in text, needle
    out = subprocess.run([sys.executable, "-m", "builder.cli", "build", "--help"], cwd=ROOT,
                         capture_output=True, text=True, env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    options = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", out.stdout)) - {"--help"}
    section = text.split("### `builder build`", 1)[1].split("\n### ", 1)[0]
    assert options and {o for o in options if o not in section} == set()


# --- the schema against the validator -------------------------------------------------

def _concrete(path: str) -> list[str]:
    return [catalog_schema.SAMPLE_NAMES.get(part, part) for part in path.split(".")] if path else []


def maximal() -> dict:
    """A release holding every field the schema describes, each with its example."""
    data: dict = {}
    for f in catalog_schema.FIELDS:
        *parents, leaf = _concrete(f.path)
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        if f.example is None:
            node.setdefault(leaf, {})
        else:
            node[leaf] = copy.deepcopy(f.example)
    return data


def _load(tmp_path: Path, release: dict):
    root = {"release": "_schema_root", "abstract": True}
    (tmp_path / "_schema_root.yaml").write_text(yaml.safe_dump(root))
    (tmp_path / "99.01.yaml").write_text(yaml.safe_dump(release, sort_keys=False))
    return catalog.load(tmp_path)


def test_a_release_with_every_described_field_loads(tmp_path):
    data = maximal()
    assert data["parent"] == "_schema_root"
    loaded = _load(tmp_path, data).get(str(data["release"]))
    assert set(loaded.variants) == {catalog_schema.SAMPLE_NAMES["<variant>"]}


def _levels() -> dict[str, set[str]]:
    """Each mapping the schema describes by named keys: its path and those keys (keys moved
    elsewhere included: the validator still recognises them, to say where they went)."""
    levels: dict[str, set[str]] = {}
    for path in [f.path for f in catalog_schema.FIELDS] + list(catalog_schema.MOVED):
        parent, _, leaf = path.rpartition(".")
        if not leaf.startswith("<"):
            levels.setdefault(parent, set()).add(leaf)
    return levels


@pytest.mark.parametrize("level", sorted(_levels()))
def test_the_validator_allows_exactly_the_described_keys(tmp_path, level):
    """An unknown key at each level makes the validator list what it allows there."""
    data = maximal()
    node = data
    for part in _concrete(level):
        node = node[part]
    node[UNKNOWN] = "x"
    with pytest.raises(CatalogError) as caught:
        _load(tmp_path, data)
    key = ".".join([*_concrete(level), UNKNOWN])
    found = [p.message for p in caught.value.problems if p.key == key]
    assert found, f"the validator does not refuse {key}: {[str(p) for p in caught.value.problems]}"
    allowed = set(re.fullmatch(r"unknown key \(allowed: (.*)\)", found[0]).group(1).split(", "))
    described = _levels()[level]
    assert (sorted(allowed - described), sorted(described - allowed)) == ([], []), \
        f"{level or 'top level'}: (accepted but not described, described but not accepted)"


def test_every_key_set_of_the_validator_is_described():
    """The module-level *_KEYS sets of catalog.py (read with ast, so a new one counts at once):
    each key is the last part of some described path."""
    tree = ast.parse((ROOT / "builder" / "catalog" / "__init__.py").read_text(encoding="utf-8"))
    leaves = {p.rpartition(".")[2] for p in [f.path for f in catalog_schema.FIELDS] + list(catalog_schema.MOVED)}
    sets = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Set) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id.endswith("_KEYS"):
            sets[node.targets[0].id] = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    assert "TOP_KEYS" in sets and "VARIANT_KEYS" in sets
    missing = {name: sorted(keys - leaves) for name, keys in sets.items() if keys - leaves}
    assert missing == {}
