"""The orchestration of build, derive, push and base, carried out on the in-memory
FakeEngine: which engine calls happen in which order, that a tag moves only after every
check passed, and that a failure moves none. No Docker engine."""

from __future__ import annotations

import json

import pytest

from builder import catalog, run
from builder import plan as pl
from builder.core.contract import Label
from builder.core.errors import BuildError, PatchError, UserError
from builder.engine.buildsettings import BuildSettings
from builder.render.base_recipe import BaseRecipe

from .fake_engine import FakeEngine
from .test_readback import components_held, sample_report

CAT = catalog.load()
REL = CAT.get("21.08")


class Captured(run.Output):
    def __init__(self) -> None:
        self.results: list[str] = []
        self.messages: list[str] = []
        super().__init__(result=self.results.append, say=self.messages.append)


def answers(image: str, command: list[str], report: dict | None = None) -> tuple[int, str]:
    """What the image's programs print: its report, or a patch check that applied."""
    text = " ".join(command)
    if "image_report" in text:
        return 0, json.dumps(report or sample_report())
    if "ALL-APPLIED" in text:
        return 0, "ALL-APPLIED"
    return 0, ""


@pytest.fixture
def engine(monkeypatch, tmp_path) -> FakeEngine:
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    e = FakeEngine()
    e.add_image(BaseRecipe(REL.offline).tag)  # the offline base is there: nothing to debootstrap
    e.run_handler = answers
    return e


def build_plan(**kw) -> pl.BuildPlan:
    return pl.plan_build(
        CAT, pl.BuildArgs(**{"release": "21.08", "build_id": "t1", "cuda_cc": "5.2,6.0,6.1,7.0,7.5,8.0,8.6", **kw})
    )


def test_a_build_is_built_read_back_labelled_then_tagged(engine):
    out = Captured()
    run.run_build(build_plan(), lambda: engine, BuildSettings(), out=out)
    names = engine.names()
    assert names.count("build") == 2  # the image, then its label-only image
    assert names.index("run_capture") < names.index("tag")  # read back before any tag moves
    tags = [c[2] for c in engine.calls if c[0] == "tag"]
    assert tags == ["local/tensorflow:21.08-tf2-py3", "local/tensorflow:21.08-tf2-py3-t1"] == out.results
    labels = engine.image_labels(tags[0])  # measured: what the image reported, not the request
    assert labels[Label.FRAMEWORK_VERSION] == "2.5.0" and labels[Label.CUDNN] == "8.5.0"
    assert any("base: local/cuda-base" in m for m in out.messages)


def test_a_failed_build_moves_no_tag(engine):
    old = engine.add_image("local/tensorflow:21.08-tf2-py3")
    engine.build_fails_at = 2
    with pytest.raises(BuildError, match="returned a non-zero code"):
        run.run_build(build_plan(), lambda: engine, BuildSettings(), out=Captured())
    assert "tag" not in engine.names()
    assert engine.image_id("local/tensorflow:21.08-tf2-py3") == old


def test_an_image_that_disagrees_with_the_catalog_is_not_tagged(engine):
    report = sample_report()
    report["version"] = "2.4.0"
    engine.run_handler = lambda image, command: answers(image, command, report)
    with pytest.raises(BuildError, match="does not match release 21.08"):
        run.run_build(build_plan(), lambda: engine, BuildSettings(), out=Captured())
    assert "tag" not in engine.names()


def test_dry_run_builds_and_pulls_nothing(engine):
    out = Captured()
    run.run_build(build_plan(), lambda: engine, BuildSettings(), dry_run=True, out=out)
    assert not {"build", "tag", "pull", "push"} & set(engine.names())
    line = json.loads(out.results[0])
    assert line["base_kind"] == "offline" and line["tags"][1].endswith("-t1") and not line["build_base"]


def test_the_engine_is_not_reached_when_the_source_tree_is_refused(tmp_path, engine):
    src = tmp_path / "src"
    src.mkdir()
    (src / "leak").symlink_to("/etc/hostname")
    with pytest.raises(UserError, match="leak"):
        run.run_build(build_plan(framework_src=src), lambda: pytest.fail("the engine was reached"), BuildSettings())


def parent(engine: FakeEngine) -> str:
    labels = {
        "dev.tfbuilder.release": "21.08",
        "dev.tfbuilder.variant": "tf2-py3",
        "dev.tfbuilder.cuda-compute-capabilities": "5.2,6.0,6.1,7.0,7.5,8.0,8.6",
    }
    env = ["TF_CUDA_COMPUTE_CAPABILITIES=5.2,6.0,6.1,7.0,7.5,8.0,8.6", "TF_ENABLE_XLA=1", "CUDA_VERSION=11.2.152"]
    engine.add_image("local/tensorflow:21.08-tf2-py3", labels=labels, env=env)
    return "local/tensorflow:21.08-tf2-py3"


def test_a_derive_checks_patches_builds_reads_back_and_only_then_tags(engine, tmp_path):
    patch = tmp_path / "fix.patch"
    patch.write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    out = Captured()
    plan = pl.plan_derive(parent(engine), "me/tf:fix", patches=[patch], test=False)
    run.run_derive(plan, lambda: engine, BuildSettings(), CAT, out=out)
    names = engine.names()
    first_run, first_build = names.index("run_capture"), names.index("build")
    assert first_run < first_build  # the patch is tried on the parent's source first
    assert names[-1] == "tag" and engine.calls[-1][2] == "me/tf:fix" and out.results == ["me/tf:fix"]


def test_a_patch_that_does_not_apply_builds_nothing(engine, tmp_path):
    patch = tmp_path / "bad.patch"
    patch.write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    engine.run_handler = lambda image, command: (10, "FAILED bad.patch\nHunk #1 FAILED at 1")
    plan = pl.plan_derive(parent(engine), "me/tf:bad", patches=[patch], test=False)
    with pytest.raises(PatchError, match="patch bad.patch does not apply to the source in .*: Hunk #1 FAILED"):
        run.run_derive(plan, lambda: engine, BuildSettings(), CAT, out=Captured())
    assert "build" not in engine.names() and "tag" not in engine.names()


def test_a_runtime_image_is_not_a_parent_and_the_one_line_names_its_devel_image(engine):
    labels = {
        "dev.tfbuilder.release": "26.11",
        "dev.tfbuilder.variant": "tf2-py3",
        "dev.tfbuilder.runtime-of": "local/tensorflow:26.11-tf2-py3",
    }
    engine.add_image("local/tensorflow:26.11-tf2-py3-runtime", labels=labels, env=[])
    plan = pl.plan_derive("local/tensorflow:26.11-tf2-py3-runtime", "me/tf:x", pip=["jq"], test=False)
    with pytest.raises(UserError) as err:
        run.run_derive(plan, lambda: engine, BuildSettings(), CAT, out=Captured())
    assert str(err.value) == (
        "--from local/tensorflow:26.11-tf2-py3-runtime is a runtime image (no compiler, no CUDA "
        "toolkit): derive from its devel image, local/tensorflow:26.11-tf2-py3"
    )
    assert "build" not in engine.names() and "tag" not in engine.names()


def test_a_base_that_exists_is_not_built_again(engine):
    out = Captured()
    tag = run.run_base(pl.plan_base(CAT, "21.08"), lambda: engine, BuildSettings(), out=out)
    assert tag == BaseRecipe(REL.offline).tag == out.results[0] and "build" not in engine.names()
    assert "nothing to do" in out.messages[0]


def test_a_missing_base_is_built_on_its_rootfs_then_tagged(monkeypatch, tmp_path):
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    engine = FakeEngine()
    recipe = BaseRecipe(REL.offline)
    engine.add_image(recipe.rootfs_image)  # debootstrap already imported: no debootstrap here
    tag = run.run_base(pl.plan_base(CAT, "21.08"), lambda: engine, BuildSettings(), out=Captured())
    assert [n for n in engine.names() if n in ("build", "tag")] == ["build", "tag"] and engine.image_id(tag)
    request = next(c[1] for c in engine.calls if c[0] == "build")
    assert (
        request.log_path == tmp_path / "cache" / "logs" / f"base-{tag.split(':')[-1]}.log"
    )  # where every command logs


def test_a_layer_cache_and_a_builder_reach_each_image_build_and_never_the_label_step(monkeypatch, tmp_path):
    """--layer-cache: the base, the variant and a derived image each read and write their own
    tag of the cache repository; the label-only step (no layer) has nothing to cache."""
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    engine = FakeEngine()
    engine.add_image(BaseRecipe(REL.offline).rootfs_image)
    engine.run_handler = answers
    settings = BuildSettings(layer_cache="r.corp/tf-cache", builder="e2")
    run.run_build(build_plan(), lambda: engine, settings, out=Captured())
    # the image builds on --builder; its label step here, on the image loaded into this engine
    assert [c[1].builder for c in engine.calls if c[0] == "build"] == ["e2", "e2", None]
    refs = [c[1].cache_ref for c in engine.calls if c[0] == "build"]
    assert refs == ["r.corp/tf-cache:base-bullseye-cuda11.2-py3.9", "r.corp/tf-cache:21.08-tf2-py3", None]
    engine.calls.clear()
    run.run_derive(
        pl.plan_derive(parent(engine), "me/tf:jq", apt=["jq"], test=False),
        lambda: engine,
        settings,
        CAT,
        out=Captured(),
    )
    refs = [c[1].cache_ref for c in engine.calls if c[0] == "build"]
    assert refs == ["r.corp/tf-cache:derive-me_tf_jq", None]


def test_zstd_reaches_every_build_the_label_step_included(monkeypatch, tmp_path):
    """The label step exports the image again: left at gzip, BuildKit would turn the
    zstd layers the build made back into gzip (measured: a pushed image all gzip)."""
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    engine = FakeEngine()
    engine.add_image(BaseRecipe(REL.offline).rootfs_image)
    engine.run_handler = answers
    settings = BuildSettings(compression="zstd")
    run.run_build(build_plan(), lambda: engine, settings, out=Captured())
    assert [c[1].compression for c in engine.calls if c[0] == "build"] == ["zstd"] * 3  # base, image, labels
    engine.calls.clear()
    run.run_derive(
        pl.plan_derive(parent(engine), "me/tf:jq", apt=["jq"], test=False),
        lambda: engine,
        settings,
        CAT,
        out=Captured(),
    )
    assert [c[1].compression for c in engine.calls if c[0] == "build"] == ["zstd", "zstd"]


def test_the_unlabelled_image_does_not_stay_behind_unless_someone_tagged_it(engine):
    """On the containerd store every build would otherwise leave one more <none> image."""
    from builder import image

    run.run_build(build_plan(), lambda: engine, BuildSettings(), out=Captured())
    labelled = engine.image_id("local/tensorflow:21.08-tf2-py3")
    assert set(engine.store) == {engine.image_id(BaseRecipe(REL.offline).tag), labelled}
    kept = engine.add_image("someone/else:1")
    image.forget_unlabelled(engine, kept, labelled)
    assert engine.image_id("someone/else:1") == kept
    image.forget_unlabelled(engine, "sha256:" + "e" * 64, labelled)  # gone already (the containerd store): no error


REL_2611 = CAT.get("26.11")


def report_2611() -> dict:
    """A report like image_report.py's for a 26.11 image that matches the catalog."""
    from builder.in_image.image_report import coverage_table

    report = sample_report()
    archs = REL_2611.cuda_cc
    sms = [a.replace(".", "") for a in archs]
    binaries = [
        {
            "component": "tensorflow",
            "path": "/tf/libtensorflow_cc.so.2",
            "sass": ["60", "70", "80", "89", "90"],
            "ptx": ["90"],
        },
        {"component": "extension", "path": "/x/tfext/_tfext_ops.so", "sass": sms, "ptx": ["90"]},
    ]
    report.update(
        version="2.21.0",
        python="3.13.5",
        horovod=None,
        components=components_held("26.11"),
        cuda_binaries=binaries,
        coverage=coverage_table(binaries, archs),
    )
    report["extension"] = {
        **report["extension"],
        "library": "/x/tfext/_tfext_ops.so",
        "cuda_compute_capabilities": [f"sm_{a}" for a in sms] + ["compute_90"],
    }
    return report


def answers_2611(image: str, command: list[str], toolchain: str = "", runtime_digest: str = "d1") -> tuple[int, str]:
    text = " ".join(command)
    if "command -v" in text:
        return 0, toolchain
    if "tfext.sysconfig" in text:
        return 0, "/x/tfext/_tfext_ops.so\n"
    if text.startswith("sha256sum"):
        return 0, f"{'d1' if 'runtime' not in image and not image.startswith('sha256:r') else runtime_digest}  x\n"
    return answers(image, command, report_2611())


@pytest.fixture
def engine_2611(monkeypatch, tmp_path) -> FakeEngine:
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    e = FakeEngine()
    e.add_image(BaseRecipe.for_release(REL_2611).tag)
    e.add_image(BaseRecipe.for_release(REL_2611).rootfs_image)
    e.run_handler = answers_2611
    return e


def runtime_plan() -> pl.BuildPlan:
    return pl.plan_build(CAT, pl.BuildArgs(release="26.11", build_id="t1", base="offline", runtime=True))


def test_runtime_is_built_from_the_tagged_devel_image_checked_then_tagged(engine_2611):
    out = Captured()
    run.run_build(runtime_plan(), lambda: engine_2611, BuildSettings(), out=out)
    devel = ["local/tensorflow:26.11-tf2-py3", "local/tensorflow:26.11-tf2-py3-t1"]
    assert out.results == devel + [f"{r}-runtime" for r in devel]
    builds = [c[1] for c in engine_2611.calls if c[0] == "build"]
    assert [b.buildargs.get("DEVEL_IMAGE") for b in builds] == [
        None,
        None,
        devel[0],
        None,
    ]  # image, labels, runtime, labels
    # one layered Dockerfile, its devel stage then its runtime stage, on the same base
    assert [b.target for b in builds] == ["devel", None, "runtime", None]
    assert (
        builds[0].buildargs["BASE_IMAGE"] == builds[2].buildargs["BASE_IMAGE"] == BaseRecipe.for_release(REL_2611).tag
    )
    assert builds[2].contexts == {}  # the legacy builder has no named contexts: core and devel from its cache
    runtime = engine_2611.image_labels(f"{devel[0]}-runtime")
    assert (
        runtime[Label.FRAMEWORK_VERSION] == "2.21.0"
    )  # measured in the runtime image (the real label test: integration)
    assert runtime[Label.COVERAGE] == engine_2611.image_labels(devel[0])[Label.COVERAGE] != ""


def test_on_buildkit_the_runtime_stage_takes_the_devel_image_itself(engine_2611):
    """A BuildKit cache pruned between the two builds must not compile the extension again:
    the devel stage is the devel image just built (a named build context)."""
    engine_2611.backend = "buildkit"
    run.run_build(runtime_plan(), lambda: engine_2611, BuildSettings(), out=Captured())
    builds = [c[1] for c in engine_2611.calls if c[0] == "build"]
    assert builds[2].target == "runtime"
    assert builds[2].contexts == {"devel": "docker-image://local/tensorflow:26.11-tf2-py3"}


@pytest.mark.parametrize(
    "toolchain,digest,message",
    [
        (
            "/usr/bin/gcc\n/usr/bin/nvcc\n",
            "d1",
            "the runtime image holds a compiler toolchain: /usr/bin/gcc, /usr/bin/nvcc",
        ),
        ("", "d2", "the runtime image's /x/tfext/_tfext_ops.so is not the devel image's"),
    ],
)
def test_a_runtime_image_with_a_compiler_or_another_extension_is_not_tagged(engine_2611, toolchain, digest, message):
    def handler(image, command):
        # the runtime image is the third build's (untagged) id; the devel image is tagged by then
        devel_ids = {engine_2611.image_id("local/tensorflow:26.11-tf2-py3")}
        runtime = image not in devel_ids and not image.startswith("local/")
        return (
            answers_2611("runtime" if runtime else image, command, toolchain, digest)
            if ("command -v" in " ".join(command) or " ".join(command).startswith("sha256sum"))
            else answers_2611(image, command)
        )

    engine_2611.run_handler = handler
    with pytest.raises(BuildError) as err:
        run.run_build(runtime_plan(), lambda: engine_2611, BuildSettings(), out=Captured())
    assert message in str(err.value)
    assert not [c for c in engine_2611.calls if c[0] == "tag" and c[2].endswith("-runtime")]


def test_runtime_only_builds_one_image_and_never_exports_the_devel_stage(engine_2611):
    """--runtime-only: one build of the runtime stage (its devel stage inside it, never an
    image), read back and labelled, tagged TAG-runtime; no devel tag, no devel comparison."""
    engine_2611.backend = "buildkit"
    out = Captured()
    plan = pl.plan_build(
        CAT, pl.BuildArgs(release="26.11", build_id="t1", base="offline", runtime=True, runtime_only=True)
    )
    assert [[ref for job in vp.images["offline"] for ref in job.refs] for vp in plan.variants] == [
        ["local/tensorflow:26.11-tf2-py3-runtime", "local/tensorflow:26.11-tf2-py3-t1-runtime"]
    ]
    run.run_build(plan, lambda: engine_2611, BuildSettings(), out=out)
    assert out.results == ["local/tensorflow:26.11-tf2-py3-runtime", "local/tensorflow:26.11-tf2-py3-t1-runtime"]
    builds = [c[1] for c in engine_2611.calls if c[0] == "build"]
    assert [b.target for b in builds] == ["runtime", None]  # the image, then its label step
    assert builds[0].contexts == {}  # the devel stage is built inside, from the render
    assert not engine_2611.image_id("local/tensorflow:26.11-tf2-py3")
    labels = engine_2611.image_labels("local/tensorflow:26.11-tf2-py3-runtime")
    assert labels[Label.FRAMEWORK_VERSION] == "2.21.0" and labels[Label.RUNTIME_OF] == "local/tensorflow:26.11-tf2-py3"


def test_a_push_published_but_not_verified_leaves_no_other_ref_unpushed_and_exits_3(engine, monkeypatch):
    """`build --push`: the engine pushed the first tag but it could not be read back; the
    second tag is still pushed, each is reported, and the run ends with exit 3 (published),
    not 1 (failed)."""
    from builder import registry as reg
    from builder.core.errors import Reported, Unverified

    pushed: list[str] = []

    def push(self, image, ref, creds, insecure=False):
        pushed.append(ref)
        if len(pushed) == 1:
            raise Unverified(
                f"published {ref}@sha256:{'1' * 64} (the engine's digest), but could not read it back "
                "to verify it: HTTP 503"
            )
        return reg.PushResult(ref, "sha256:" + "2" * 64)

    monkeypatch.setattr(reg, "check_before_build", lambda *a: None)
    monkeypatch.setattr(reg.Pusher, "push", push)
    out = Captured()
    with pytest.raises(Reported) as exc:
        run.run_build(build_plan(push_to="registry.example:5000/ml"), lambda: engine, BuildSettings(), out=out)
    assert exc.value.exit_code == 3
    assert pushed == [
        "registry.example:5000/ml/tensorflow:21.08-tf2-py3",
        "registry.example:5000/ml/tensorflow:21.08-tf2-py3-t1",
    ]
    assert any(
        m.startswith("error: published registry.example:5000/ml/tensorflow:21.08-tf2-py3@") for m in out.messages
    )
    assert f"registry.example:5000/ml/tensorflow:21.08-tf2-py3-t1@sha256:{'2' * 64}" in out.results
