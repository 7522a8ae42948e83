"""Plans are pure values: computed from the catalog and the options, no engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder import catalog
from builder import plan as pl
from builder.core.errors import UserError
from builder.render.base_recipe import BaseRecipe

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
    assert 'TF_CUDA_COMPUTE_CAPABILITIES="8.6"' in rendered.dockerfile or "8.6" in str(rendered.meta)
    assert plan.options.xla is False and plan.options.env == (("A", "1"),)


def test_the_plan_holds_each_render_job_and_the_base_decision():
    """Complete before the run: --base auto is the offline base on every machine (one tag,
    one recipe: never the upstream image where a registry answers); the variant is rendered
    for it, and its job names its base, its build arguments, its read-back expectation and
    its tags."""
    plan = build_plan()
    recipe = BaseRecipe.for_release(CAT.get("21.08"))
    assert [(o.kind, o.image, o.obtain) for o in plan.base_decision.options] == [("offline", recipe.tag, "build")]
    assert plan.base_decision.asked == "--base auto"
    vp = plan.variants[0]
    assert set(vp.renders) == {"offline"} and plan.recipe == recipe and plan.base_job is not None
    (job,) = vp.images["offline"]
    assert job.buildargs["BASE_IMAGE"] == recipe.tag == vp.renders["offline"].meta["base_image"]
    assert job.buildargs["BUILD_ID"] == "b1" and "BUILD_REF" in job.buildargs and job.dated  # the date: at build time
    assert job.refs == ("local/tensorflow:21.08-tf2-py3", "local/tensorflow:21.08-tf2-py3-b1")
    assert job.expect.release.name == "21.08" and job.expect.variant.name == "tf2-py3" and job.expect.coverage
    assert [o.kind for o in build_plan(base="offline").base_decision.options] == ["offline"]
    assert build_plan(base="offline").variants[0].refs == vp.refs  # the same recipe, the same tags


def test_the_upstream_base_has_tags_of_its_own():
    """--base upstream is another recipe (Ubuntu, the catalog's Python): its default tags
    carry the upstream OS, so the release tag never names two images."""
    plan = build_plan(base="upstream")
    rel = CAT.get("21.08")
    assert [(o.kind, o.image) for o in plan.base_decision.options] == [("upstream", rel.upstream_ref)]
    assert plan.variants[0].refs == (
        "local/tensorflow:21.08-tf2-py3-ubuntu20.04",
        "local/tensorflow:21.08-tf2-py3-ubuntu20.04-b1",
    )
    assert plan.variants[0].images["upstream"][0].buildargs["BASE_IMAGE"] == rel.upstream_ref
    assert plan.base_job is None
    assert build_plan(base="upstream", tags=("me/tf:u",)).variants[0].refs == ("me/tf:u",)  # -t: the user's choice


def test_a_custom_base_needs_its_own_tag():
    with pytest.raises(UserError, match="a custom base makes a different image than the release's.*-t/--tag"):
        build_plan(base="reg.example/cuda:12")
    plan = build_plan(base="reg.example/cuda:12", tags=("me/tf:custom",))
    assert plan.variants[0].refs == ("me/tf:custom",)
    assert plan.variants[0].images["custom"][0].buildargs["BASE_IMAGE"] == "reg.example/cuda:12"


def test_push_sends_each_tag_where_it_names_or_under_registry():
    plan = build_plan(tags=("reg.example:5000/team/tf:1",), push=True)
    assert plan.push and {r: p.ref for r, p in plan.pushes.items()} == {
        "reg.example:5000/team/tf:1": "reg.example:5000/team/tf:1"
    }
    plan = build_plan(push=True, registry="reg.example:5000/ml")
    assert [p.ref for p in plan.pushes.values()] == [
        "reg.example:5000/ml/tensorflow:21.08-tf2-py3",
        "reg.example:5000/ml/tensorflow:21.08-tf2-py3-b1",
    ]
    assert build_plan(push_to="reg.example/ml").pushes  # the library's shorthand: --push --registry
    assert not build_plan().pushes and not build_plan().push


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"push": True}, "--push: 'local/tensorflow:21.08-tf2-py3' names no registry host"),
        ({"push": True, "tags": ("team/tf:1",)}, "names no registry host"),
        ({"registry": "reg.example:5000"}, "--registry says where --push pushes: give --push too"),
        ({"sign": Path("k.key")}, "--sign signs what --push pushes"),
    ],
)
def test_push_mistakes_are_refused_before_anything_is_built(kw, message):
    with pytest.raises(UserError, match=message.replace("(", "\\(").replace(")", "\\)")):
        build_plan(**kw)


def test_build_args_reach_the_jobs_and_are_checked():
    """--build-arg: Docker's proxy arguments (kept out of the image's history) and what the
    Dockerfile declares; the builder's own arguments are refused naming what sets them."""
    plan = build_plan(build_args=("HTTPS_PROXY=http://proxy:3128", "no_proxy=localhost"))
    (job,) = plan.variants[0].images["offline"]
    assert job.buildargs["HTTPS_PROXY"] == "http://proxy:3128" and job.buildargs["no_proxy"] == "localhost"
    assert plan.base_job.buildargs["HTTPS_PROXY"] == "http://proxy:3128"  # the base's downloads too
    assert plan.user_build_args == {"HTTPS_PROXY": "http://proxy:3128", "no_proxy": "localhost"}
    assert job.expect == build_plan().variants[0].images["offline"][0].expect  # the read-back is unchanged


@pytest.mark.parametrize(
    "arg,message",
    [
        ("BASE_IMAGE=x", "--build-arg BASE_IMAGE: set by --base"),
        ("BUILD_ID=x", "--build-arg BUILD_ID: set by --build-id"),
        ("COMPILE_CACHE=x", "--build-arg COMPILE_CACHE: set by --compile-cache"),
        ("BUILD_SETTINGS=x", "--build-arg BUILD_SETTINGS: set by the build settings"),
        ("DEVEL_IMAGE=x", "--build-arg DEVEL_IMAGE: set by --runtime"),
        ("FOO=1", "--build-arg FOO: the Dockerfile declares no such build argument; accepted: ALL_PROXY"),
        ("FOO", "--build-arg 'FOO' is not NAME=VALUE"),
        ("1FOO=x", "--build-arg '1FOO': not a build argument name"),
        ("A B=x", "not a build argument name"),
        ("HTTP_PROXY=a\nb", "--build-arg HTTP_PROXY: the value holds a control character"),
    ],
)
def test_bad_build_args_are_one_line_refusals(arg, message):
    with pytest.raises(UserError, match=message.replace("(", "\\(").replace(")", "\\)")):
        build_plan(build_args=(arg,))


def test_declared_args_are_read_from_the_arg_lines():
    text = "ARG BASE_IMAGE=x\nFROM ${BASE_IMAGE}\n  arg A=1 B\nRUN echo ARG C\n"
    assert pl.declared_args(text) == {"BASE_IMAGE", "A", "B"}
    pl.check_build_args({"A": "1"}, text)
    with pytest.raises(UserError, match="accepted: A, ALL_PROXY"):
        pl.check_build_args({"C": "1"}, text)


def test_a_proxy_password_is_redacted():
    from builder.core.redact import redact

    build_plan(build_args=("HTTP_PROXY=http://bob:pr0xy-secret@proxy:3128",))
    assert "pr0xy-secret" not in redact("via http://proxy:3128 with pr0xy-secret")
    # a token as the whole userinfo (no ':'), and a URL without a scheme
    build_plan(build_args=("HTTPS_PROXY=http://t0ken-only-abc@proxy:3128", "https_proxy=carl:s3kr1t@proxy:3128"))
    shown = redact("HTTPS_PROXY=http://t0ken-only-abc@proxy:3128 https_proxy=carl:s3kr1t@proxy:3128")
    assert "t0ken-only-abc" not in shown and "s3kr1t" not in shown


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"all_variants": True, "variant": "tf2-py3"}, "--all and --variant exclude each other"),
        ({"all_variants": True, "tags": ("a:b",)}, "--tag names one image"),
        ({"build_id": "../x"}, "--build-id"),
        ({"build_id": "x" * 65}, "64 at most"),
        ({"tags": ("Upper/Case:x",)}, "lowercase"),
        ({"base": "a b"}, "--base"),
        ({"compile_cache": "ftp://x"}, "--compile-cache"),
        ({"push_to": "not a registry"}, "--registry"),
        ({"push": True, "registry": "not a registry"}, "--registry"),
        ({"variant": "nope"}, "nope"),
        ({"release": "99.99"}, "unknown release"),
        ({"env": ("NOEQUALS",)}, "NAME=VALUE"),
        ({"framework_src": Path("/no/such/dir")}, "is not a directory"),
    ],
)
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
    assert pl.plan_derive("a:b", "c:d", component_patches={"dali": [dali]}).spec.component_patches == {"dali": [dali]}
    with pytest.raises(UserError, match="no component 'nsight' takes patches"):
        pl.plan_derive("a:b", "c:d", component_patches={"nsight": [dali]})
    for bad, says in (
        (tmp_path / "none.patch", "--dali-patch .*none.patch: no such file"),
        (patch.with_name("fix.diff"), "--dali-patch .*fix.diff: name it NAME.patch"),
    ):
        if says.endswith("NAME.patch"):
            bad.write_text(patch.read_text())
        with pytest.raises(UserError, match=says):
            pl.plan_derive("a:b", "c:d", component_patches={"dali": [bad]})


def test_push_plan_targets_the_registry():
    plan = pl.plan_push("local/tensorflow:21.08-tf2-py3", "localhost:5000/ml")
    assert plan.ref == "localhost:5000/ml/tensorflow:21.08-tf2-py3" and plan.tries == 4
    assert pl.plan_push("a/b:c", "h:1", tag="t").ref == "h:1/b:t"
    with pytest.raises(UserError, match="--tries"):
        pl.plan_push("a:b", "h:1", tries=0)


def test_push_without_registry_goes_where_the_image_names():
    """docker push's way: IMAGE's own registry; -t changes only the tag."""
    assert pl.plan_push("localhost:5000/team/tf:1", None).ref == "localhost:5000/team/tf:1"
    assert pl.plan_push("reg.example/a/b:c", None, tag="d").ref == "reg.example/a/b:d"
    assert pl.plan_push("reg.example/a/b", None).ref == "reg.example/a/b:latest"
    for image in ("local/tensorflow:21.08-tf2-py3", "a" * 64):
        with pytest.raises(UserError, match="names no registry host: give --registry"):
            pl.plan_push(image, None)


def test_push_t_takes_a_whole_reference_as_build_t_does():
    """-t means one thing in build and push: a whole HOST[:PORT]/NAME:TAG goes there as
    given; a bare tag keeps its old meaning; the two ways do not mix."""
    assert pl.plan_push("local/tensorflow:21.08-tf2-py3", None, "reg.example:5000/team/tf:26.11").ref == (
        "reg.example:5000/team/tf:26.11"
    )
    assert pl.plan_push("local/tensorflow:21.08-tf2-py3", "reg.example/ns", "v1").ref == "reg.example/ns/tensorflow:v1"
    refused = {
        ("reg.example/tf:1", "reg.example"): "names its registry: give -t a bare tag with --registry",
        ("reg.example/tf", None): "give HOST\\[:PORT\\]/NAME:TAG",
        ("reg.example/tf@sha256:" + "a" * 64, None): "give HOST\\[:PORT\\]/NAME:TAG",
        ("tf:1", None): "names no registry",
        ("reg.example/Bad:1", None): "-t",
    }
    for (tag, registry), says in refused.items():
        with pytest.raises(UserError, match=says):
            pl.plan_push("local/tensorflow:21.08-tf2-py3", registry, tag)


def test_base_plan_is_the_recipe_of_the_release():
    plan = pl.plan_base(CAT, "26.11")
    assert plan.tag == BaseRecipe.for_release(CAT.get("26.11")).tag and not plan.rebuild
    assert plan.recipe.bare and not BaseRecipe.for_release(CAT.get("21.08")).bare
