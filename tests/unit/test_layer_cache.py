"""--layer-cache: the repository's grammar, one tag per image, the buildx flags, the
refusals (legacy builder, an engine that cannot export, a registry that does not answer)
and how the option reaches every build the builder runs."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from builder.core import layer_cache
from builder.core.errors import BuildError, UserError
from builder.engine import BuildRequest, DockerEngine, buildsettings, buildx


@pytest.mark.parametrize(
    "repo",
    [
        "127.0.0.1:5000/cache",
        "registry.corp/team/tf-cache",
        "localhost/c",
        "cache:5000/x",
        "[::1]:5000/c",
        "r.io/a__b/c-d.e",
    ],
)
def test_registry_repositories_are_accepted(repo):
    assert layer_cache.check(repo) == repo


@pytest.mark.parametrize(
    "repo",
    [
        "team/cache",
        "cache",
        "r.io/Cache",
        "r.io/c:tag",
        "r.io/c@sha256:" + "0" * 64,
        "r.io/",
        "r.io/c/",
        "r.io//c",
        "r.io/-c",
        "https://r.io/c",
        "r.io/c d",
        "r.io/c\n",
        "r.io/" + "a" * 300,
    ],
)
def test_anything_else_is_refused_in_one_line(repo):
    with pytest.raises(UserError) as err:
        layer_cache.check(repo)
    assert "\n" not in str(err.value) and "HOST[:PORT]/NAME" in str(err.value)


def test_each_image_gets_its_own_valid_tag():
    assert layer_cache.ref_for("r.io/c", "21.08-tf2-py3") == "r.io/c:21.08-tf2-py3"
    assert layer_cache.ref_for("r.io/c", "derive-local_tensorflow:x/y") == "r.io/c:derive-local_tensorflow-x-y"
    assert layer_cache.ref_for("r.io/c", "..") == "r.io/c:cache"
    assert len(layer_cache.ref_for("r.io/c", "x" * 300).split(":", 1)[1]) == 128


def test_a_base_keeps_its_cache_tag_when_its_recipe_changes():
    a = layer_cache.base_name("local/cuda-base:bullseye-cuda11.2-py3.9-00c2b373d258")
    b = layer_cache.base_name("local/cuda-base:bullseye-cuda11.2-py3.9-9f8e7d6c5b4a")
    assert a == b == "base-bullseye-cuda11.2-py3.9"
    assert layer_cache.base_name("local/cuda-base:bookworm-cuda12.4-py3.11-9f8e7d6c5b4a") != a


def test_buildx_reads_and_writes_every_steps_layers():
    req = buildx.BuildxRequest(Path("/ctx"), cache_ref="r.io/c:21.08-tf2-py3")
    cmd = buildx.argv(req, Path("/m.json"))
    assert cmd[cmd.index("--cache-from") + 1] == "type=registry,ref=r.io/c:21.08-tf2-py3"
    assert cmd[cmd.index("--cache-to") + 1] == "type=registry,ref=r.io/c:21.08-tf2-py3,mode=max"
    assert cmd[-1] == "/ctx"
    assert "--cache-to" not in buildx.argv(buildx.BuildxRequest(Path("/ctx")), Path("/m.json"))


FAKE_BUILDX = r"""#!/bin/sh
echo '{"vertexes": [{"digest": "sha256:1", "name": "exporting cache to registry", "started": "2026-01-01T00:00:00Z", "error": "Cache export is not supported for the docker driver.\nSwitch to a different driver, or turn on the containerd image store, and try again."}]}' >&2
exit 1
"""


def fake_docker(script: str, where: Path, monkeypatch) -> None:
    """A `docker` on PATH that answers as SCRIPT does."""
    (where / "docker").write_text(script)
    (where / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{where}:/usr/bin:/bin")


def test_an_engine_that_cannot_export_gets_told_how_to_turn_it_on(tmp_path, monkeypatch):
    """buildx's own error on the classic image store (its text as buildx 0.13.1 prints it)."""
    fake_docker(FAKE_BUILDX, tmp_path, monkeypatch)
    with pytest.raises(UserError) as err:
        buildx.build(buildx.BuildxRequest(tmp_path, cache_ref="r.io/c:x"))
    assert "containerd-snapshotter" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(BuildError):  # the same failure without a cache asked for stays a build failure
        buildx.build(buildx.BuildxRequest(tmp_path))


def test_the_legacy_builder_refuses_before_building(tmp_path):
    engine = DockerEngine.__new__(DockerEngine)  # no engine is reached: the refusal comes first
    with pytest.raises(UserError, match="needs the BuildKit backend"):
        engine.build(BuildRequest(context=tmp_path, cache_ref="r.io/c:x"))


def test_a_registry_that_does_not_answer_is_reported_before_any_build():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(UserError, match=rf"cannot reach 127.0.0.1:{port}"):
            buildsettings.from_options(None, None, [], layer_cache=f"127.0.0.1:{port}/cache")
        s.listen()
        settings = buildsettings.from_options(None, None, [], layer_cache=f"127.0.0.1:{port}/cache")
    assert settings.cache_ref("21.08-tf2-py3") == f"127.0.0.1:{port}/cache:21.08-tf2-py3"
    assert not settings, "the cache is not something delivered into the build"
    assert buildsettings.from_options(None, None, []).cache_ref("x") is None


@pytest.mark.parametrize("command", ["build", "base", "derive"])
def test_every_building_command_takes_the_option(command):
    out = subprocess.run(
        [sys.executable, "-m", "builder.cli", command, "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert "--layer-cache" in out.stdout, out.stdout + out.stderr


def test_a_bad_repository_on_the_command_line_is_one_line_and_exit_2():
    out = subprocess.run(
        [sys.executable, "-m", "builder.cli", "base", "--release", "21.08", "--layer-cache", "team/cache"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--layer-cache" in out.stderr, out.stderr


# --- --builder: another buildx builder, the image loaded here ----------------------------


def test_another_builder_writes_an_archive_instead_of_loading_into_its_engine():
    req = buildx.BuildxRequest(Path("/ctx"), builder="e2", output_file=Path("/t/image.tar"))
    cmd = buildx.argv(req, Path("/m.json"))
    assert cmd[cmd.index("--output") + 1] == "type=docker,dest=/t/image.tar,compression=gzip,force-compression=true"
    assert cmd[cmd.index("--builder") + 1] == "e2"


FAKE_INSPECT = r"""#!/bin/sh
[ "$1 $2" = "buildx inspect" ] || exit 3
[ "$3" = "e2" ] && { echo "Name: e2"; exit 0; }
echo "ERROR: no builder \"$3\" found" >&2
exit 1
"""


def test_a_builder_buildx_does_not_know_is_refused_in_one_line(tmp_path, monkeypatch):
    fake_docker(FAKE_INSPECT, tmp_path, monkeypatch)
    buildx.check_builder("e2")
    with pytest.raises(UserError) as err:
        buildx.check_builder("nope")
    assert (
        str(err.value) == '--builder nope: no builder "nope" found (docker buildx ls lists the builders and contexts)'
    )
    for bad in ("-x", "a b", "a\nb", "x" * 70, "../e"):
        with pytest.raises(UserError, match="not a builder name"):
            buildx.check_builder(bad)
    assert buildsettings.from_options(None, None, [], builder="e2").builder == "e2"


def test_the_legacy_builder_refuses_another_builder(tmp_path):
    engine = DockerEngine.__new__(DockerEngine)
    with pytest.raises(UserError, match="--builder needs the BuildKit backend"):
        engine.build(BuildRequest(context=tmp_path, builder="e2"))


# --- hostile values: both reach buildx's comma-separated options ----------------------

SEPARATORS = [",", "\n", "\r", "\x00", "=", " ", "\t", '"']


@hsettings(max_examples=300, deadline=None)
@given(value=st.text(max_size=30), bad=st.sampled_from(SEPARATORS), where=st.integers(0, 30))
def test_no_separator_or_line_break_gets_into_a_cache_ref_or_builder_name(value, bad, where):
    for candidate in (
        value + bad,
        bad + value,
        value[:where] + bad + value[where:],
        "127.0.0.1:5000/c" + bad,
        "r.io/c" + bad + "mode=min",
    ):
        assert layer_cache.REPO.fullmatch(candidate) is None, candidate
        assert buildx.BUILDER_NAME.fullmatch(candidate) is None, candidate
