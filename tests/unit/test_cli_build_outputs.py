"""What `builder build` reports (--json, --dry-run, the base line) and where --push
sends each tag, carried out on the in-memory FakeEngine; and the command-line forms of
--push, --registry, --progress, --version (the installed console script)."""

from __future__ import annotations

import json
import subprocess

import pytest

from builder import plan as pl
from builder import registry as reg
from builder import run
from builder.engine.buildsettings import BuildSettings

from .test_orchestration import CAT, Captured, build_plan, engine, parent  # noqa: F401 - engine is a fixture

DIGEST = "sha256:" + "2" * 64


def builder(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["builder", *args], capture_output=True, text=True, timeout=60)


class Pushes(list):
    checked: list[str]


@pytest.fixture
def pushes(monkeypatch) -> Pushes:
    """(image, ref) of each push, every one verified with DIGEST; .checked: the registries
    checked before the build. No registry is asked."""
    done = Pushes()
    done.checked = checked = []

    def push(self, image, ref, creds, insecure=False):
        done.append((image, ref))
        return reg.PushResult(ref, DIGEST)

    monkeypatch.setattr(reg, "check_before_build", lambda host, creds, insecure: checked.append(host))
    monkeypatch.setattr(reg.Pusher, "push", push)
    return done


def test_the_base_line_says_auto_is_the_offline_base(engine):
    out = Captured()
    run.run_build(build_plan(), lambda: engine, BuildSettings(), out=out)
    line = next(m for m in out.messages if m.startswith("base: "))
    assert line.startswith("base: local/cuda-base") and "(--base auto: offline base from Debian bullseye" in line
    assert not [c for c in engine.calls if c[0] == "pull"]  # nothing is tried upstream first


def test_build_json_reports_each_image_its_id_and_the_base(engine):
    out = Captured()
    outcomes = run.run_build(build_plan(), lambda: engine, BuildSettings(), as_json=True, out=out)
    (doc,) = [json.loads(r) for r in out.results]  # one document, no ref lines
    assert doc["release"] == "21.08" and doc["build_id"] == "t1"
    assert doc["base"]["kind"] == "offline" and doc["base"]["image"].startswith("local/cuda-base")
    (image,) = doc["images"]
    assert image["refs"] == ["local/tensorflow:21.08-tf2-py3", "local/tensorflow:21.08-tf2-py3-t1"]
    assert image["image_id"] == outcomes[0].image_id == engine.image_id("local/tensorflow:21.08-tf2-py3")
    assert image["image"] == "devel" and image["pushed"] == []


def test_push_sends_each_tag_to_the_registry_it_names(engine, pushes):
    """`-t HOST/NAME:TAG --push`: the tag is pushed where it names (docker buildx's way),
    the registry checked before anything is built, the digest in --json."""
    out = Captured()
    plan = build_plan(tags=("reg.example:5000/team/tf:1",), push=True)
    run.run_build(plan, lambda: engine, BuildSettings(), as_json=True, out=out)
    assert pushes == [("reg.example:5000/team/tf:1", "reg.example:5000/team/tf:1")]
    assert pushes.checked == ["reg.example:5000"]
    (doc,) = [json.loads(r) for r in out.results]
    assert doc["images"][0]["pushed"] == [{"ref": "reg.example:5000/team/tf:1", "digest": DIGEST}]


def test_credentials_given_for_one_registry_go_to_no_other(engine, pushes):
    plan = build_plan(tags=("a.example/tf:1", "b.example/tf:1"), push=True)
    with pytest.raises(pl.UserError, match="the tags go to 2 registries \\(a.example, b.example\\)"):
        run.run_build(plan, lambda: engine, BuildSettings(), creds=object(), out=Captured())
    assert pushes.checked == [] and "build" not in engine.names()


def test_registry_moves_the_pushes_under_it(engine, pushes):
    out = Captured()
    run.run_build(build_plan(push=True, registry="reg.example:5000/ml"), lambda: engine, BuildSettings(), out=out)
    assert [ref for _, ref in pushes] == [
        "reg.example:5000/ml/tensorflow:21.08-tf2-py3",
        "reg.example:5000/ml/tensorflow:21.08-tf2-py3-t1",
    ]
    assert f"reg.example:5000/ml/tensorflow:21.08-tf2-py3@{DIGEST}" in out.results


def test_dry_run_json_is_the_whole_plan(engine, pushes):
    """--dry-run --json: the base, every image and its tags, the capabilities compiled, the
    pushes, the build arguments (redacted): nothing built, pushed or pulled."""
    out = Captured()
    plan = build_plan(push=True, registry="reg.example/ml", build_args=("HTTPS_PROXY=http://u:pw-123@p:3128",))
    run.run_build(plan, lambda: engine, BuildSettings(), dry_run=True, as_json=True, out=out)
    (doc,) = [json.loads(r) for r in out.results]
    assert doc["dry_run"] and doc["base"]["kind"] == "offline"
    (variant,) = doc["variants"]
    assert variant["cuda_compute_capabilities"] == ["5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6"]
    assert variant["pushes"] == [
        {"ref": "local/tensorflow:21.08-tf2-py3", "to": "reg.example/ml/tensorflow:21.08-tf2-py3"},
        {"ref": "local/tensorflow:21.08-tf2-py3-t1", "to": "reg.example/ml/tensorflow:21.08-tf2-py3-t1"},
    ]
    assert variant["build_args"] == {"HTTPS_PROXY": "http://u:***@p:3128"}
    assert variant["runtime"] is False and [i["image"] for i in variant["images"]] == ["devel"]
    assert pushes == [] and not {"build", "tag", "pull", "push"} & set(engine.names())


def test_dry_run_lines_hold_the_runtime_image():
    """Without --json a dry run prints one JSON line per variant, now with its images."""
    plan = pl.plan_build(CAT, pl.BuildArgs(release="26.11", build_id="b1", runtime=True))
    entry = run.dry_run_entry(plan, plan.variants[0], run.base.BaseChoice("offline", "x", "r"))
    assert [i["image"] for i in entry["images"]] == ["devel", "runtime"] and entry["runtime"]
    assert entry["tags"][-1] == "local/tensorflow:26.11-tf2-py3-b1-runtime"


def test_build_args_reach_the_engine(engine):
    run.run_build(build_plan(build_args=("NO_PROXY=localhost",)), lambda: engine, BuildSettings(), out=Captured())
    builds = [c[1] for c in engine.calls if c[0] == "build"]
    assert builds[0].buildargs["NO_PROXY"] == "localhost" and builds[0].buildargs["BUILD_ID"] == "t1"


def test_derive_json_build_args_and_push(engine, pushes):
    """derive --json: the tag, its id and parent, the pushed digest; --build-arg checked
    against the derived Dockerfile and handed to the engine; --push to where the tag names."""
    out = Captured()
    plan = pl.plan_derive(
        parent(engine),
        "reg.example:5000/me/tf:jq",
        apt=["jq"],
        test=False,
        build_args=("HTTP_PROXY=http://p:3128",),
        push=True,
    )
    image_id = run.run_derive(plan, lambda: engine, BuildSettings(), CAT, as_json=True, out=out)
    (doc,) = [json.loads(r) for r in out.results]
    assert doc == {
        "image": "reg.example:5000/me/tf:jq",
        "image_id": image_id,
        "parent": "local/tensorflow:21.08-tf2-py3",
        "pushed": {"ref": "reg.example:5000/me/tf:jq", "digest": DIGEST},
    }
    assert pushes.checked == ["reg.example:5000"] and pushes == [(doc["image"], doc["image"])]
    build = next(c[1] for c in engine.calls if c[0] == "build")
    assert build.buildargs["HTTP_PROXY"] == "http://p:3128" and build.buildargs["BASE_IMAGE"] == doc["parent"]


def test_derive_refuses_an_undeclared_build_arg_before_building(engine):
    """In the plan: before the parent is read or --pip resolved (the derived Dockerfile's
    ARGs are its template's, every one the builder's own)."""
    with pytest.raises(pl.UserError, match="--build-arg FOO: the Dockerfile declares no such build argument"):
        pl.plan_derive(parent(engine), "me/tf:jq", apt=["jq"], test=False, build_args=("FOO=1",))
    with pytest.raises(pl.UserError, match="--build-arg COMPILE_CACHE: set by --compile-cache"):
        pl.plan_derive(parent(engine), "me/tf:jq", apt=["jq"], test=False, build_args=("COMPILE_CACHE=x",))
    plan = pl.plan_derive(parent(engine), "me/tf:jq", apt=["jq"], test=False, build_args=("HTTPS_PROXY=http://p:3128",))
    assert plan.user_build_args == {"HTTPS_PROXY": "http://p:3128"}
    assert "build" not in engine.names()


# --- the console script -------------------------------------------------------------------


def one_line_error(result: subprocess.CompletedProcess, text: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and result.stdout == "", result
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], result.stderr


@pytest.mark.parametrize(
    "args,text",
    [
        (
            ["build", "-r", "21.08", "--push", "--dry-run"],
            "--push: 'local/tensorflow:21.08-tf2-py3' names no registry host: tag it HOST[:PORT]/NAME:TAG with -t",
        ),
        (
            ["build", "-r", "21.08", "--registry", "reg.example:5000", "--dry-run"],
            "--registry says where --push pushes",
        ),
        (["build", "-r", "21.08", "--push", "reg.example:5000", "--dry-run"], "unexpected extra argument"),
        (["build", "-r", "21.08", "--base", "reg.example/cuda:12", "--dry-run"], "needs its own tag: give -t/--tag"),
        (["build", "-r", "21.08", "--build-arg", "BASE_IMAGE=x", "--dry-run"], "--build-arg BASE_IMAGE: set by --base"),
        (["build", "-r", "21.08", "--progress", "fancy", "--dry-run"], "--progress 'fancy': use one of auto, plain"),
        (
            ["build", "-r", "21.08", "-q", "--progress", "rawjson", "--dry-run"],
            "-q/--quiet is --progress quiet: it cannot go with --progress rawjson",
        ),
        (["derive", "--from", "a:b", "-t", "c:d", "--apt", "jq", "--registry", "r.example"], "give --push too"),
        (
            ["derive", "--from", "a:b", "-t", "c:d", "--apt", "jq", "--build-arg", "BASE_IMAGE=x"],
            "--build-arg BASE_IMAGE: set by --from",
        ),
        (["push", "local/tensorflow:21.08-tf2-py3"], "names no registry host: give --registry HOST[:PORT][/NS]"),
        (["push", "reg.example:5000/ml/tf@sha256:" + "a" * 64], "is a digest reference: it has no tag to push under"),
        (
            ["build", "-r", "21.08", "--all", "--base", "reg.example/cuda:12", "--dry-run"],
            "with --all: a custom base makes images other than the release's",
        ),
        (
            ["build", "-r", "21.08", "--all", "--base", "reg.example/cuda:12", "-t", "x/y:1", "--dry-run"],
            "--tag names one image; it cannot go with --all",
        ),
    ],
)
def test_flag_mistakes_are_one_line_before_anything_runs(args, text):
    one_line_error(builder(*args), text)


def test_version_prints_and_exits_0():
    for flag in ("--version", "-V"):
        out = builder(flag)
        assert out.returncode == 0 and out.stdout.startswith("builder ") and out.stderr == "", out


def test_base_print_json_and_the_flags_help():
    out = builder("base", "-r", "21.08", "--print", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["tag"].startswith("local/cuda-base:") and "FROM" in doc["dockerfile"]
    helps = {cmd: builder(cmd, "--help").stdout for cmd in ("build", "derive", "base", "push", "doctor")}
    for cmd in ("build", "derive", "base"):
        assert "--progress" in helps[cmd] and "rawjson" in helps[cmd] and "--json" in helps[cmd], cmd
    for cmd in ("build", "derive"):
        assert "--build-arg" in helps[cmd] and "--push" in helps[cmd] and "--registry" in helps[cmd], cmd
    assert "-t, --tag" in helps["push"] and "only REF@DIGEST" in helps["push"]
    assert "--release" in helps["doctor"] and "--json" in helps["doctor"]


def test_wide_records_are_built_by_keyword_only():
    """BuildArgs and BuildPlan: a positional call that skips or swaps one of twenty fields
    is refused instead of meaning something else."""
    with pytest.raises(TypeError, match="BuildArgs\\(\\) takes keyword arguments only"):
        pl.BuildArgs("21.08")
    plan = build_plan()
    with pytest.raises(TypeError, match="BuildPlan\\(\\) takes keyword arguments only"):
        pl.BuildPlan(plan.release, plan.variants)
    assert plan.builder_args["BUILD_ID"] == plan.build_id and plan.user_build_args == {}
