"""Plans are pure values: computed from the catalog and the options, no engine."""
from __future__ import annotations

from pathlib import Path

import pytest

from builder import catalog, plan as pl
from builder.base_recipe import BaseRecipe
from builder.errors import UserError

CAT = catalog.load()


def build_plan(**kw) -> pl.BuildPlan:
    return pl.plan_build(CAT, pl.BuildArgs(**{"release": "21.08", "build_id": "b1", **kw}))


def test_default_variant_and_its_two_tags():
    plan = build_plan()
    assert [v.variant.name for v in plan.variants] == ["tf2-py3"]
    assert plan.variants[0].refs == ("local/tensorflow:21.08-tf2-py3", "local/tensorflow:21.08-tf2-py3-b1")
    assert plan.build_id == "b1" and plan.base == "auto" and not plan.keep_going
    assert plan.options.offline_base_image == BaseRecipe(CAT.get("21.08").offline).tag


def test_explicit_tags_replace_the_release_tags_and_repo_moves_them():
    assert build_plan(tags=("me/tf:x",)).variants[0].refs == ("me/tf:x",)
    assert build_plan(repo="reg.example/ml/tf").variants[0].refs[0] == "reg.example/ml/tf:21.08-tf2-py3"


def test_all_skips_what_cannot_be_built_here_and_keeps_going():
    plan = build_plan(all_variants=True)
    assert [v.variant.name for v in plan.variants] == ["tf2-py3"]
    assert [name for name, _ in plan.skipped] == ["tf1-py3"] and "1.15" in plan.skipped[0][1]
    assert plan.keep_going


def test_default_build_id_is_the_utc_time():
    plan = pl.plan_build(CAT, pl.BuildArgs(release="21.08"), now=0)
    assert plan.build_id == "19700101.000000"


def test_render_options_reach_the_rendered_dockerfile():
    plan = build_plan(cuda_cc="8.6", xla=False, env=("A=1",))
    rendered = plan.variants[0].rendered
    assert "TF_CUDA_COMPUTE_CAPABILITIES=\"8.6\"" in rendered.dockerfile or "8.6" in str(rendered.meta)
    assert plan.options.xla is False and plan.options.env == (("A", "1"),)


def test_the_plan_holds_each_render_job_and_the_base_decision():
    """Complete before the run: with --base auto the upstream image is tried, else the
    offline base is built; the variant is rendered once for each, and each render's job
    names its base, its build arguments, its read-back expectation and its tags."""
    plan = build_plan()
    recipe = BaseRecipe.for_release(CAT.get("21.08"))
    assert [(o.kind, o.image, o.obtain) for o in plan.base_decision.options] == [
        ("upstream", CAT.get("21.08").upstream_ref, "pull"), ("offline", recipe.tag, "build")]
    vp = plan.variants[0]
    assert set(vp.renders) == {"upstream", "offline"} and plan.recipe == recipe
    (job,) = vp.images["offline"]
    assert job.buildargs["BASE_IMAGE"] == recipe.tag == vp.renders["offline"].meta["base_image"]
    assert job.buildargs["BUILD_ID"] == "b1" and "BUILD_REF" in job.buildargs and job.dated  # the date: at build time
    assert job.refs == ("local/tensorflow:21.08-tf2-py3", "local/tensorflow:21.08-tf2-py3-b1")
    assert job.expect.release.name == "21.08" and job.expect.variant.name == "tf2-py3" and job.expect.coverage
    assert vp.images["upstream"][0].buildargs["BASE_IMAGE"] == CAT.get("21.08").upstream_ref
    assert [o.kind for o in build_plan(base="offline").base_decision.options] == ["offline"]


@pytest.mark.parametrize("kw,message", [
    ({"all_variants": True, "variant": "tf2-py3"}, "--all and --variant exclude each other"),
    ({"all_variants": True, "tags": ("a:b",)}, "--tag names one image"),
    ({"build_id": "../x"}, "--build-id"),
    ({"build_id": "x" * 65}, "64 at most"),
    ({"tags": ("Upper/Case:x",)}, "lowercase"),
    ({"base": "a b"}, "--base"),
    ({"compile_cache": "ftp://x"}, "--compile-cache"),
    ({"push_to": "not a registry"}, "--registry"),
    ({"variant": "nope"}, "nope"),
    ({"release": "99.99"}, "unknown release"),
    ({"env": ("NOEQUALS",)}, "NAME=VALUE"),
    ({"framework_src": Path("/no/such/dir")}, "is not a directory"),
])
def test_bad_options_are_refused_in_the_plan(kw, message):
    with pytest.raises(UserError, match=message.replace("-", "\\-").replace(".", "\\.")):
        build_plan(**kw)


def test_bake_ca_needs_a_bundle(tmp_path):
    with pytest.raises(UserError, match="needs at least one --ca-bundle"):
        pl.baked_ca(True, [])
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    assert pl.baked_ca(True, [pem]) == (pem.read_text(),) and pl.baked_ca(False, [pem]) == ()


def test_derive_plan(tmp_path):
    patch = tmp_path / "fix.patch"
    patch.write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    plan = pl.plan_derive("local/tensorflow:21.08-tf2-py3", "me/tf:fix", patches=[patch], pip=["six==1.16.0"])
    assert plan.spec.patches == [patch] and plan.spec.pip == ["six==1.16.0"]
    assert plan.test and plan.log_name == "derive-me_tf_fix.log"
    assert not pl.plan_derive("a:b", "c:d", apt=["jq"], test=False).test
    with pytest.raises(UserError, match="nothing to derive"):
        pl.plan_derive("a:b", "c:d")
    with pytest.raises(UserError, match="--tag"):
        pl.plan_derive("a:b", "C:d", apt=["jq"])
    dali = tmp_path / "0001-dali.patch"
    dali.write_text(patch.read_text())
    assert pl.plan_derive("a:b", "c:d", dali_patches=[dali]).spec.dali_patches == [dali]
    for bad, says in ((tmp_path / "none.patch", "--dali-patch .*none.patch: no such file"),
                      (patch.with_name("fix.diff"), "--dali-patch .*fix.diff: name it NAME.patch")):
        if says.endswith("NAME.patch"):
            bad.write_text(patch.read_text())
        with pytest.raises(UserError, match=says):
            pl.plan_derive("a:b", "c:d", dali_patches=[bad])


def test_push_plan_targets_the_registry():
    plan = pl.plan_push("local/tensorflow:21.08-tf2-py3", "localhost:5000/ml")
    assert plan.ref == "localhost:5000/ml/tensorflow:21.08-tf2-py3" and plan.tries == 4
    assert pl.plan_push("a/b:c", "h:1", tag="t").ref == "h:1/b:t"
    with pytest.raises(UserError, match="--tries"):
        pl.plan_push("a:b", "h:1", tries=0)


def test_base_plan_is_the_recipe_of_the_release():
    plan = pl.plan_base(CAT, "26.11")
    assert plan.tag == BaseRecipe.for_release(CAT.get("26.11")).tag and not plan.rebuild
    assert plan.recipe.bare and not BaseRecipe.for_release(CAT.get("21.08")).bare
