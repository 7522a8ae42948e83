"""`builder build --all` as one bake (on the FakeEngine, no Docker engine): what the run
adds to the definition, the base built once inside it and tagged, each variant read back
and labelled before any tag moves, and the cases that build one by one instead (said why)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder import catalog, run
from builder import plan as pl
from builder.core.errors import Reported
from builder.engine.buildsettings import BuildSettings
from builder.image import bake
from builder.render import RenderOptions, render
from builder.render.base_recipe import BaseRecipe

from .fake_engine import FakeEngine
from .test_orchestration import Captured, answers

CAT = catalog.load()
REL = CAT.get("21.08")
RECIPE = BaseRecipe(REL.offline)


@pytest.fixture
def engine(monkeypatch, tmp_path) -> FakeEngine:
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    e = FakeEngine()
    e.backend = "buildkit"
    e.add_image(RECIPE.rootfs_image)
    e.run_handler = answers
    return e


def all_plan(**kw) -> pl.BuildPlan:
    return pl.plan_build(
        CAT,
        pl.BuildArgs(
            **{
                "release": "21.08",
                "all_variants": True,
                "build_id": "t1",
                "base": "offline",
                "cuda_cc": "5.2,6.0,6.1,7.0,7.5,8.0,8.6",
                **kw,
            }
        ),
    )


def bakes(engine: FakeEngine) -> list[tuple]:
    return [c for c in engine.calls if c[0] == "bake"]


def test_the_base_and_the_variants_are_one_bake_then_each_variant_is_checked_then_tagged(engine, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    out = Captured()
    run.run_build(all_plan(), lambda: engine, BuildSettings(ca_bundles=(ca,), layer_cache="r.corp/c"), out=out)
    [(_, definition, targets, _)] = bakes(engine)
    assert targets == ["21-08-tf2-py3", "base-21-08"]
    variant, base = definition["target"]["21-08-tf2-py3"], definition["target"]["base-21-08"]
    assert variant["contexts"] == {RECIPE.tag: "target:base-21-08"}  # the base is built once, in the bake
    assert variant["secret"] == [f"id=builder-ca.crt,src={Path(variant['secret'][0].split('src=')[1])}"]
    assert base["secret"] == variant["secret"] and "BUILD_SETTINGS" not in variant["args"]
    assert variant["cache-to"] == ["type=registry,ref=r.corp/c:21.08-tf2-py3,mode=max"]
    assert base["cache-from"] == ["type=registry,ref=r.corp/c:base-bullseye-cuda11.2-py3.9"]
    assert {"BUILD_ID", "BUILD_REF", "BUILD_DATE"} <= set(variant["args"]) and "BUILD_REF" not in base["args"]
    assert variant["attest"] == ["type=provenance,disabled=true", "type=sbom,disabled=true"]
    names = engine.names()
    first_variant_tag = [i for i, c in enumerate(engine.calls) if c[0] == "tag" and c[2] != RECIPE.tag][0]
    assert names.index("bake") < names.index("run_capture") < first_variant_tag  # read back, then tagged
    tags = [c[2] for c in engine.calls if c[0] == "tag"]
    assert tags == [RECIPE.tag, "local/tensorflow:21.08-tf2-py3", "local/tensorflow:21.08-tf2-py3-t1"]
    assert out.results == tags[1:]
    assert "--all: one bake of 1 variant(s) and the base" in out.messages
    assert not Path(variant["context"]).exists(), "the contexts are temporary"


def test_an_existing_base_is_taken_from_the_image_store(engine):
    engine.add_image(RECIPE.tag)
    run.run_build(all_plan(), lambda: engine, BuildSettings(), out=Captured())
    [(_, definition, targets, _)] = bakes(engine)
    assert targets == ["21-08-tf2-py3"] and "contexts" not in definition["target"]["21-08-tf2-py3"]
    assert "secret" not in definition["target"]["21-08-tf2-py3"]  # no settings: nothing to mount


@pytest.mark.parametrize(
    "setup,why",
    [
        (lambda e: setattr(e, "backend", "legacy"), "the legacy builder has no bake"),
        ("compile_cache", "--compile-cache: a bake cannot reach a compile cache on loopback"),
    ],
)
def test_what_a_bake_cannot_do_is_built_one_by_one_and_said(engine, setup, why):
    engine.add_image(RECIPE.tag)
    kw = {"compile_cache": "http://127.0.0.1:1/ccache"} if setup == "compile_cache" else {}
    if callable(setup):
        setup(engine)
    out = Captured()
    run.run_build(all_plan(**kw), lambda: engine, BuildSettings(), out=out)
    assert not bakes(engine) and engine.names().count("build") == 2  # the variant, its label step
    assert any(m.startswith("--all: building the variants one by one: " + why) for m in out.messages), out.messages


def test_a_compile_cache_off_loopback_is_baked_with_its_url(engine):
    """docker0's address (or a team's server) is reached over the default network: the bake
    takes it as the same build argument a single build gets, so their steps share cache keys."""
    engine.add_image(RECIPE.tag)
    run.run_build(
        all_plan(compile_cache="http://172.17.0.1:8742/ccache"), lambda: engine, BuildSettings(), out=Captured()
    )
    [(_, definition, targets, _)] = bakes(engine)
    assert definition["target"][targets[0]]["args"]["COMPILE_CACHE"] == "http://172.17.0.1:8742/ccache"


def test_a_single_variant_build_never_bakes(engine):
    engine.add_image(RECIPE.tag)
    run.run_build(
        pl.plan_build(CAT, pl.BuildArgs(release="21.08", build_id="t1", base="offline")),
        lambda: engine,
        BuildSettings(),
        out=Captured(),
    )
    assert not bakes(engine)


def test_a_failed_bake_moves_no_tag_and_is_reported_per_variant(engine):
    engine.add_image(RECIPE.tag)
    engine.build_fails_at = 5
    out = Captured()
    with pytest.raises(Reported, match="1 of 1 variants failed"):
        run.run_build(all_plan(), lambda: engine, BuildSettings(), out=out)
    assert "tag" not in engine.names()
    assert any(m.startswith("build failed: ") for m in out.messages), out.messages
    assert any(m.startswith("  21.08/tf2-py3: FAILED (") for m in out.messages), out.messages


def test_the_run_inputs_reach_every_target_and_nothing_else_changes():
    rendered = render(REL, REL.variant("tf2-py3"), RenderOptions(base="offline", offline_base_image=RECIPE.tag))
    layout = bake.Layout(Path("/o"))
    plain = bake.definition(REL, [rendered], layout, "b")
    inputs = bake.RunInputs({"builder-pip-index": Path("/s/pip")}, None, {"BUILD_REF": "abc"}, no_cache=True)
    ran = bake.definition(REL, [rendered], layout, "b", inputs)
    for name, target in ran["target"].items():
        extra = {k: v for k, v in target.items() if plain["target"][name].get(k) != v}
        assert extra.pop("secret") == ["id=builder-pip-index,src=/s/pip"] and extra.pop("no-cache") is True
        assert extra.pop("attest")
        if name == "21-08-tf2-py3":
            assert extra.pop("args") == {**plain["target"][name]["args"], "BUILD_REF": "abc"}
        assert extra == {}, name
    assert ran["group"] == plain["group"]
