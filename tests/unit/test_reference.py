"""The reference pages are generated from the code and must not drift from it:
docs/reference/cli.md and catalog.md equal a fresh `python3 -m builder.cli.reference`, and the
catalog's JSON Schema it is written from (generated from the models of
builder/catalog/schema.py) agrees with the loader both ways: a catalog holding every described
field loads, and at every level the loader's own list of allowed keys is the schema's."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builder import catalog
from builder.catalog import json_schema
from builder.cli import reference
from builder.core.errors import CatalogError

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN = "zz_not_a_field"


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_the_committed_reference_equals_a_fresh_generation(name):
    committed = (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
    assert committed == reference.pages()[name], (
        f"docs/reference/{name} drifted from the code: run python3 -m builder.cli.reference"
    )


def test_the_check_mode_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)
    assert reference.main([]) == 0 and reference.main(["--check"]) == 0
    (tmp_path / "cli.md").write_text("stale\n")
    assert reference.main(["--check"]) == 1
    assert reference.main(["--bogus"]) == 2


def test_the_cli_page_names_every_command_and_option():
    """A spot check that the walk reaches subcommands and options from the help itself."""
    text = reference.cli_markdown()
    for needle in (
        "### `builder build`",
        "#### `builder cache serve`",
        "`--layer-cache <str>`",
        "`-r, --release <str>`",
        "| `--compression <str>` | `gzip` |",
    ):
        assert needle in text, needle
    out = subprocess.run(
        [sys.executable, "-m", "builder.cli", "build", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"},
    )
    options = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", out.stdout)) - {"--help"}
    section = text.split("### `builder build`", 1)[1].split("\n### ", 1)[0]
    assert options and {o for o in options if o not in section} == set()


# --- the schema against the validator -------------------------------------------------
# The page and the JSON Schema come from the models the loader validates with; these tests
# hold the schema's examples and key sets to what the loader accepts and refuses.

SAMPLE_VARIANT = "tf2-py3"


def _deref(doc: dict, node: dict) -> dict:
    return reference._deref(doc, node)


def _build(doc: dict, node: dict) -> dict:
    """A mapping holding every field NODE describes, each with its example."""
    out: dict = {}
    for name, prop in node.get("properties", {}).items():
        if prop.get("deprecated"):
            continue
        if prop.get("examples"):
            out[name] = copy.deepcopy(prop["examples"][0])
            continue
        for choice in reference._choices(doc, prop):
            if "properties" in choice:
                out[name] = _build(doc, choice)
            elif isinstance(choice.get("additionalProperties"), dict) and "$ref" in choice["additionalProperties"]:
                out[name] = {SAMPLE_VARIANT: _build(doc, _deref(doc, choice["additionalProperties"]))}
            else:
                continue
            break
    return out


def maximal() -> dict:
    """A release holding every field the schema describes, each with its example."""
    doc = json_schema.resolved()
    return _build(doc, doc)


def _load(tmp_path: Path, release: dict):
    root = {"release": "_schema_root", "abstract": True}
    (tmp_path / "_schema_root.yaml").write_text(yaml.safe_dump(root))
    (tmp_path / "99.01.yaml").write_text(yaml.safe_dump(release, sort_keys=False))
    return catalog.load(tmp_path)


def test_a_release_with_every_described_field_loads(tmp_path):
    data = maximal()
    assert (
        data["parent"] == "_schema_root"
        and "horovod" in data
        and "device_code" in data["variants"][SAMPLE_VARIANT]["framework"]
    )
    loaded = _load(tmp_path, data).get(str(data["release"]))
    assert set(loaded.variants) == {SAMPLE_VARIANT}


def _levels() -> dict[str, set[str]]:
    """Each mapping the schema describes by named keys: its path and those keys (keys moved
    elsewhere included: the validator still recognises them, to say where they went)."""
    doc = json_schema.resolved()
    levels: dict[str, set[str]] = {}

    def walk(node: dict, path: str) -> None:
        levels[path] = set(node.get("properties", {}))
        for name, prop in node.get("properties", {}).items():
            for choice in reference._choices(doc, prop):
                where = f"{path}.{name}".lstrip(".")
                if "properties" in choice:
                    walk(choice, where)
                entry = choice.get("additionalProperties")
                if isinstance(entry, dict) and "$ref" in entry:
                    walk(_deref(doc, entry), f"{where}.{SAMPLE_VARIANT}")

    walk(doc, "")
    return levels


@pytest.mark.parametrize("level", sorted(_levels()))
def test_the_validator_allows_exactly_the_described_keys(tmp_path, level):
    """An unknown key at each level makes the validator list what it allows there."""
    data = maximal()
    node = data
    for part in level.split(".") if level else []:
        node = node[part]
    node[UNKNOWN] = "x"
    with pytest.raises(CatalogError) as caught:
        _load(tmp_path, data)
    key = ".".join([*(level.split(".") if level else []), UNKNOWN])
    found = [p.message for p in caught.value.problems if p.key == key]
    assert found, f"the validator does not refuse {key}: {[str(p) for p in caught.value.problems]}"
    allowed = set(re.fullmatch(r"unknown key \(allowed: (.*)\)", found[0]).group(1).split(", "))
    described = _levels()[level]
    assert (sorted(allowed - described), sorted(described - allowed)) == ([], []), (
        f"{level or 'top level'}: (accepted but not described, described but not accepted)"
    )


def test_the_key_sets_other_modules_read_are_the_models():
    """The *_KEYS names builder.catalog still exports are the models' keys, not a copy."""
    levels = _levels()
    assert catalog.TOP_KEYS == levels[""] - {"tools"} and catalog.VENDOR_KEYS == levels["vendor"]  # moved
    assert catalog.ENTRYPOINT_KEYS == levels["entrypoint"] - {"copyright_holder"}  # moved
    assert catalog.FRAMEWORK_KEYS == levels[f"variants.{SAMPLE_VARIANT}.framework"]
