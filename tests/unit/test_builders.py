"""--builders A,B: the names, the spread of --all's variants over them (one bake per
builder, each image read back and tagged here), the images a build starts FROM made
present on another builder first, and the refusals. No Docker engine: FakeEngine, and
the docker CLI's answers replaced where builders.py asks them."""

from __future__ import annotations

import pytest

from builder import catalog, run
from builder import plan as pl
from builder.core.errors import Reported, UserError
from builder.engine import builders, buildx
from builder.engine.buildsettings import BuildSettings
from builder.render.base_recipe import BaseRecipe
from tests import two_variants

from .fake_engine import FakeEngine
from .test_orchestration import Captured, answers

# --- names and the spread (pure) -------------------------------------------------------


def test_builder_names_are_parsed_in_order_and_checked():
    assert builders.parse("e2,default") == ("e2", "default")
    assert builders.parse(" a , b ") == ("a", "b")
    for bad, why in (
        ("a,,b", "'' is not a builder name"),
        ("a b", "is not a builder name"),
        ("a,a", "a builder is named twice"),
        ("a,x=y", "'x=y' is not a builder name"),
    ):
        with pytest.raises(UserError, match=why):
            builders.parse(bad)


def test_targets_go_to_the_builders_in_turn_and_an_idle_builder_is_left_out():
    assert builders.assign(["t3", "t1", "t2"], ("x", "y")) == {"x": ["t1", "t3"], "y": ["t2"]}
    assert builders.assign(["t1"], ("x", "y", "z")) == {"x": ["t1"]}
    spread = builders.assign([f"t{i}" for i in range(7)], ("a", "b", "c"))
    assert sorted(sum(spread.values(), [])) == [f"t{i}" for i in range(7)]  # each once
    assert max(map(len, spread.values())) - min(map(len, spread.values())) <= 1


def test_the_images_a_bake_starts_from_follow_its_target_contexts():
    definition = {
        "target": {
            "v": {"args": {"BASE_IMAGE": "local/base:1", "BUILD_ID": "x"}, "contexts": {"local/base:1": "target:b"}},
            "w": {"args": {"BASE_IMAGE": "local/other:2"}},
            "b": {"args": {"ROOTFS_IMAGE": "local/rootfs:bullseye"}},
        }
    }
    assert builders.from_images(definition, ["v"]) == ["local/rootfs:bullseye"]  # the base is built in the bake
    assert builders.from_images(definition, ["w"]) == ["local/other:2"]
    assert builders.from_images(definition, ["v", "w"]) == ["local/other:2", "local/rootfs:bullseye"]


# --- the images a build starts FROM, on another builder ---------------------------------


@pytest.fixture
def stores(monkeypatch):
    """Image stores by environment: 'here' (this engine) and 'e2' (a context's engine)."""
    images = {"here": {}, "e2": {}}
    copies = []
    monkeypatch.setattr(builders, "_inspect", lambda ref, env: images[env["AT"]].get(ref))
    monkeypatch.setattr(
        builders,
        "copy",
        lambda ref, here, there: (copies.append(ref), images[there["AT"]].__setitem__(ref, images[here["AT"]][ref])),
    )
    return images, copies


HERE = {"AT": "here"}
E2 = builders.Where("e2", None, {"AT": "e2"}, engine=True)
INSTANCE = builders.Where("bk", "bk", {"AT": "e2"}, engine=False)


def test_an_image_missing_on_another_engine_is_copied_there_once(stores):
    images, copies = stores
    images["here"]["local/base:1"] = {"Id": "sha256:aa", "RepoDigests": []}
    said = []
    builders.ensure_inputs(E2, ["local/base:1"], HERE, said.append)
    builders.ensure_inputs(E2, ["local/base:1"], HERE, said.append)  # now there: not copied again
    assert copies == ["local/base:1"]
    assert said[0] == "copying local/base:1 to e2 (docker save | docker load)" and said[1].startswith("copied ")


def test_a_stale_image_under_the_same_name_there_is_replaced(stores):
    images, copies = stores
    images["here"]["local/base:1"] = {"Id": "sha256:new"}
    images["e2"]["local/base:1"] = {"Id": "sha256:old"}
    builders.ensure_inputs(E2, ["local/base:1"], HERE, lambda m: None)
    assert copies == ["local/base:1"] and images["e2"]["local/base:1"]["Id"] == "sha256:new"


def test_this_engine_and_images_it_does_not_hold_need_nothing(stores):
    images, copies = stores
    images["here"]["local/base:1"] = {"Id": "sha256:aa"}
    builders.ensure_inputs(builders.where(None, HERE), ["local/base:1"], HERE, lambda m: None)
    builders.ensure_inputs(E2, ["nvcr.io/nvidia/cuda:11.4.1"], HERE, lambda m: None)  # a registry's: resolved there
    assert copies == []


def test_a_builder_instance_cannot_read_an_image_that_only_this_engine_has(stores):
    images, copies = stores
    images["here"]["local/base:1"] = {"Id": "sha256:aa", "RepoDigests": []}
    images["here"]["reg.corp/base:1"] = {"Id": "sha256:bb", "RepoDigests": ["reg.corp/base@sha256:cc"]}
    builders.ensure_inputs(INSTANCE, ["reg.corp/base:1"], HERE, lambda m: None)  # pushed: the builder pulls it
    with pytest.raises(
        UserError,
        match=r"^--builder bk: a buildx builder instance resolves FROM through "
        r"registries, and local/base:1 exists only on this engine",
    ):
        builders.ensure_inputs(INSTANCE, ["local/base:1"], HERE, lambda m: None)
    assert copies == []


# --- builder build --all --builders ---------------------------------------------------


@pytest.fixture
def engine(monkeypatch, tmp_path) -> FakeEngine:
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDER_CATALOG", str(two_variants.write(tmp_path / "catalog")))
    checked = []
    monkeypatch.setattr(buildx, "check_builder", checked.append)
    e = FakeEngine()
    e.backend = "buildkit"
    e.checked = checked
    e.run_handler = answers
    return e


def spread_plan(builders_option: str | None = "e2,default", **kw) -> pl.BuildPlan:
    return pl.plan_build(
        catalog.load_selected(),
        pl.BuildArgs(
            **{
                "release": "21.08",
                "all_variants": True,
                "build_id": "t1",
                "base": "offline",
                "cuda_cc": "5.2,6.0,6.1,7.0,7.5,8.0,8.6",
                "builders": builders_option,
                **kw,
            }
        ),
    )


def recipe() -> BaseRecipe:
    return BaseRecipe(catalog.load_selected().get("21.08").offline)


def test_the_variants_are_spread_one_bake_per_builder_then_each_is_checked_and_tagged_here(engine, tmp_path):
    engine.add_image(recipe().tag)
    out = Captured()
    run.run_build(spread_plan(), lambda: engine, BuildSettings(), out=out)
    assert engine.checked == ["e2", "default"]  # every builder known to buildx before anything runs
    bakes = [c for c in engine.calls if c[0] == "bake"]
    assert [(c[2], c[3]) for c in bakes] == [(["21-08-tf2-py3"], "e2"), (["21-08-tf2-py3-amp"], None)]
    assert out.results == [
        "local/tensorflow:21.08-tf2-py3",
        "local/tensorflow:21.08-tf2-py3-t1",
        "local/tensorflow:21.08-tf2-py3-amp",
        "local/tensorflow:21.08-tf2-py3-amp-t1",
    ]
    assert "--all: 2 variant(s) spread over 2 builders, one bake each" in out.messages
    assert "summary: 2 built, 0 failed, 1 skipped" in out.messages


def test_a_base_to_build_is_built_once_here_before_the_builders_start_from_it(engine):
    engine.add_image(recipe().rootfs_image)
    run.run_build(spread_plan(), lambda: engine, BuildSettings(), out=Captured())
    names = engine.names()
    assert names.index("build") < names.index("bake")  # the base, alone, first
    assert engine.image_id(recipe().tag)
    assert all("base-21-08" not in c[2] for c in engine.calls if c[0] == "bake")


def test_a_failed_builder_fails_its_variants_only(engine):
    engine.add_image(recipe().tag)
    engine.bake_fails_on = {"e2"}
    out = Captured()
    with pytest.raises(Reported, match="1 of 2 variants failed"):
        run.run_build(spread_plan(), lambda: engine, BuildSettings(), out=out)
    assert out.results == ["local/tensorflow:21.08-tf2-py3-amp", "local/tensorflow:21.08-tf2-py3-amp-t1"]
    assert "  21.08/tf2-py3: FAILED (bake failed on e2)" in out.messages
    assert engine.image_id("local/tensorflow:21.08-tf2-py3") is None  # no tag moved for it


def test_one_builder_in_the_list_is_one_bake_there(engine):
    engine.add_image(recipe().tag)
    run.run_build(spread_plan("e2"), lambda: engine, BuildSettings(), out=Captured())
    assert [(c[2], c[3]) for c in engine.calls if c[0] == "bake"] == [(["21-08-tf2-py3", "21-08-tf2-py3-amp"], "e2")]


def test_what_builders_cannot_go_with_is_refused_in_one_line(engine):
    with pytest.raises(
        UserError, match="^--builders spreads the variants of --all over builders: for one image use --builder NAME$"
    ):
        pl.plan_build(catalog.load_selected(), pl.BuildArgs(release="21.08", builders="e2"))
    with pytest.raises(UserError, match="^--builder and --builders exclude each other"):
        run.run_build(spread_plan(), lambda: engine, BuildSettings(builder="e3"), out=Captured())
    with pytest.raises(UserError, match="^--builders: --compile-cache: a bake cannot reach"):
        engine.add_image(recipe().tag)
        run.run_build(
            spread_plan(compile_cache="http://127.0.0.1:1/ccache"), lambda: engine, BuildSettings(), out=Captured()
        )
    assert not [c for c in engine.calls if c[0] in ("bake", "build", "tag")]
