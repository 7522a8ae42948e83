"""The bake definition: a pure function of the rendered variants and where their contexts
live (golden values, no engine)."""

import json
from pathlib import Path

import pytest

from builder import catalog
from builder.image import bake
from builder.render import RenderOptions, render
from builder.render.base_recipe import BaseRecipe

CAT = catalog.load()


# every layer forced into gzip: a cached step may hold a zstd blob (buildx.output)
GZIP_OUT = "type=docker,compression=gzip,force-compression=true"


def rendered(release: str, variant: str, base: str = "offline"):
    rel = CAT.get(release)
    return render(rel, rel.variant(variant), RenderOptions(base=base, offline_base_image=BaseRecipe(rel.offline).tag))


def test_a_variant_on_the_offline_base_gets_it_from_the_base_target():
    rel = CAT.get("21.08")
    layout = bake.Layout(Path("/out"))
    d = bake.definition(rel, [rendered("21.08", "tf2-py3")], layout, "b1")
    tag = BaseRecipe(rel.offline).tag
    assert d == {
        "group": {"default": {"targets": ["21-08-tf2-py3"]}},
        "target": {
            "21-08-tf2-py3": {
                "context": "/out/21.08/tf2-py3",
                "dockerfile": "Dockerfile",
                "args": {"BASE_IMAGE": tag, "BUILD_ID": "b1"},
                "output": [GZIP_OUT],
                "contexts": {tag: "target:base-21-08"},
            },
            "base-21-08": {
                "context": "/out/base-21.08",
                "dockerfile": "Dockerfile",
                "args": {"ROOTFS_IMAGE": BaseRecipe(rel.offline).rootfs_image},
                "output": [GZIP_OUT],
            },
        },
    }
    json.dumps(d)  # what the file holds


def test_an_upstream_or_custom_base_needs_no_base_target():
    rel = CAT.get("21.08")
    for base in ("upstream", "registry.example/cuda:11.2"):
        d = bake.definition(rel, [rendered("21.08", "tf2-py3", base)], bake.Layout(Path("/o")), "b")
        assert list(d["target"]) == ["21-08-tf2-py3"]
        assert "contexts" not in d["target"]["21-08-tf2-py3"]


def test_no_target_is_tagged():
    """The builder tags only images that passed their checks; a bake never tags."""
    d = bake.definition(CAT.get("23.03"), [rendered("23.03", "tf2-py3")], bake.Layout(Path("/o")), "b")
    assert all("tags" not in t for t in d["target"].values())


@pytest.mark.parametrize(
    "parts,name",
    [(("21.08", "tf2-py3"), "21-08-tf2-py3"), (("base", "26.11"), "base-26-11"), (("a b", "c/d"), "a-b-c-d")],
)
def test_target_names_use_only_what_bake_allows(parts, name):
    assert bake.target_name(*parts) == name
