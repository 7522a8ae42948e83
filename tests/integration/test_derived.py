"""Derived images: the image's own docker-examples with plain `docker build`, the user
guide's example 1 written by hand, `builder derive` (patch check, packages, tests), and
incremental rebuilds through the shared compile cache."""
import json
import random
import re
import socket
import subprocess
from pathlib import Path

import pytest

from .conftest import builder, docker, image_id

ROOT = Path(__file__).resolve().parents[2]
MATMUL = (ROOT / "framework-src/csrc/core/matmul.cc").read_text()


def marker_patch(value: int, prefix: str = "") -> str:
    """A unified diff adding tfref_patch_marker() (returning `value`) to csrc/core/matmul.cc."""
    path = f"{prefix}csrc/core/matmul.cc"
    n = len(MATMUL.splitlines())
    tail = MATMUL.splitlines()[-3:]
    added = ["", f"extern \"C\" int tfref_patch_marker(void) {{ return {value}; }}"]
    lines = [f"--- a/{path}", f"+++ b/{path}", f"@@ -{n - 2},3 +{n - 2},{3 + len(added)} @@"]
    lines += [f" {t}" for t in tail] + [f"+{a}" for a in added]
    return "\n".join(lines) + "\n"


def marker(image: str) -> int:
    out = docker("run", "--rm", "--entrypoint", "python3", image, "-c",
                 "import ctypes, os, tfref; "
                 "print(ctypes.CDLL(os.path.join(tfref.sysconfig.get_lib(), 'libtfref_core.so')).tfref_patch_marker())")
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fresh_value():
    return random.randint(1000, 10 ** 9)


def test_image_own_customtensorflow_example_builds_with_plain_docker(release_image, tmp_path, scratch_tag, fresh_value):
    for name in ("Dockerfile.customtensorflow", "README.md"):
        out = docker("run", "--rm", "--entrypoint", "cat", release_image, f"/workspace/docker-examples/{name}")
        (tmp_path / name).write_text(out.stdout)
    assert f"ARG BASE_IMAGE={release_image}\n" in (tmp_path / "Dockerfile.customtensorflow").read_text()
    (tmp_path / "my-tensorflow-modifications.patch").write_text(marker_patch(fresh_value))
    out = subprocess.run(["docker", "build", "-q", "-f", "Dockerfile.customtensorflow", "-t", scratch_tag, "."],
                         cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    assert marker(scratch_tag) == fresh_value
    assert docker("run", "--rm", "--entrypoint", "pwd", scratch_tag).stdout.strip() == "/workspace"


def test_user_guide_example_1_written_by_hand(release_image, tmp_path, scratch_tag, fresh_value):
    (tmp_path / "my.patch").write_text(marker_patch(fresh_value, prefix="tensorflow-source/"))
    (tmp_path / "Dockerfile").write_text(
        f"FROM {release_image}\n"
        "COPY my.patch /tmp/my.patch\n"
        "WORKDIR /opt/tensorflow\n"
        "RUN patch -p1 < /tmp/my.patch\n"
        "RUN ./nvbuild.sh\n"
        "WORKDIR /workspace\n")
    out = subprocess.run(["docker", "build", "-q", "-t", scratch_tag, "."], cwd=tmp_path, capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    assert marker(scratch_tag) == fresh_value
    info = json.loads(docker("run", "--rm", "--entrypoint", "cat", scratch_tag, "/opt/tensorflow/build-info.json").stdout)
    assert info["modified_files"] == ["csrc/core/matmul.cc"]


def test_derive_refuses_a_patch_that_does_not_apply(release_image, tmp_path, scratch_tag):
    bad = tmp_path / "stale.patch"
    bad.write_text("--- a/csrc/core/softmax.cc\n+++ b/csrc/core/softmax.cc\n@@ -1,2 +1,2 @@\n"
                   "-// a line this file never had\n+// changed\n #include <cmath>\n")
    containers_before = set(docker("ps", "-aq").stdout.split())
    out = builder("derive", "--from", release_image, "--patch", str(bad), "--tag", scratch_tag)
    assert out.returncode == 2
    first = out.stderr.splitlines()[0]
    assert first == f"error: patch stale.patch does not apply to the source in {release_image}: Hunk #1 FAILED at 1"
    assert "rejected hunks in ./csrc/core/softmax.cc" in out.stderr and "+// changed" in out.stderr
    assert image_id(scratch_tag) is None
    assert set(docker("ps", "-aq").stdout.split()) == containers_before


@pytest.mark.parametrize("args,text", [
    (["--patch", "/nonexistent.patch"], "--patch /nonexistent.patch: no such file"),
    ([], "nothing to derive"),
    (["--apt", "Bad Name"], "is not a Debian package name"),
    (["--nvbuild-args", "--configonly"], "would not build the framework"),
])
def test_derive_bad_input(release_image, args, text):
    out = builder("derive", "--from", release_image, "--tag", "itest/never:1", *args)
    assert out.returncode == 2 and text in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_derive_patch_and_packages_passes_its_tests(release_image, tmp_path, scratch_tag, fresh_value):
    patch = tmp_path / "marker.patch"
    patch.write_text(marker_patch(fresh_value))
    out = builder("derive", "--from", release_image, "--patch", str(patch), "--apt", "jq", "--pip", "tabulate",
                  "--tag", scratch_tag, "-q")
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"\d+ passed", out.stderr)             # the parent's suite plus the derived checks
    assert marker(scratch_tag) == fresh_value
    tools = docker("run", "--rm", "--entrypoint", "bash", scratch_tag, "-c",
                   "echo '{\"a\": 1}' | jq .a && python3 -c 'import tabulate; print(tabulate.tabulate([[1]]))'")
    assert tools.returncode == 0 and tools.stdout.startswith("1\n"), tools.stderr
    report = json.loads(builder("inspect", scratch_tag, "--json").stdout)
    assert report["parent"] == release_image
    assert [p["name"] for p in report["patches"]] == ["marker.patch"]
    assert report["framework_build_info"]["patches"] == report["patches"]


def test_image_own_addpackages_example(release_image, tmp_path, scratch_tag):
    from builder import buildsettings

    out = docker("run", "--rm", "--entrypoint", "cat", release_image, "/workspace/docker-examples/Dockerfile.addpackages")
    (tmp_path / "Dockerfile").write_text(out.stdout)
    settings = buildsettings.BuildSettings(ca_bundles=(buildsettings.HOST_CA_BUNDLE,))
    with buildsettings.serve(settings) as url:
        build = subprocess.run(["docker", "build", "-q", "--network", "host", "--build-arg", f"BUILD_SETTINGS={url}",
                                "-t", scratch_tag, "."], cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stderr[-3000:]
    check = docker("run", "--rm", "--entrypoint", "bash", scratch_tag, "-c",
                   "jq --version && python3 -c 'import tabulate'")
    assert check.returncode == 0, check.stderr


@pytest.fixture(scope="module")
def cache_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("compile-cache")
    port = free_port()
    out = builder("cache", "serve", "--detach", "--dir", str(directory), "--port", str(port))
    assert out.returncode == 0, out.stderr
    yield out.stdout.strip(), directory
    builder("cache", "stop", "--dir", str(directory))


def test_patch_rebuild_through_the_shared_cache_compiles_only_the_changed_unit(
        offline_base, cache_server, tmp_path, scratch_tag, fresh_value, cache_dir):
    url, directory = cache_server
    seed = builder("build", "--release", "21.08", "--repo", "itest/cacheseed", "--build-id", "seed",
                   "--compile-cache", f"{url}/ccache", "-q")
    assert seed.returncode == 0, seed.stderr
    parent = "itest/cacheseed:21.08-tf2-py3"
    patch = tmp_path / "marker.patch"
    patch.write_text(marker_patch(fresh_value))
    out = builder("derive", "--from", parent, "--patch", str(patch), "--compile-cache", f"{url}/ccache",
                  "--tag", scratch_tag, "--no-test", "-q")
    assert out.returncode == 0, out.stderr
    log = (cache_dir / "logs" / f"derive-{scratch_tag.replace('/', '_').replace(':', '_')}.log").read_text()
    compiled = re.findall(r"nvbuild.sh: compiled: (\S+)", log)
    assert compiled == ["csrc/core/matmul.cc"], log[-2000:]
    assert re.search(r"compile cache: (\d+) of \1\b", log) is None      # not everything came from the cache
    assert marker(scratch_tag) == fresh_value
    stats = json.loads(builder("cache", "stats", "--dir", str(directory), "--json").stdout)
    assert stats["running"] and stats["hits"] > 0 and stats["objects"] > 0


def test_cache_server_down_degrades_to_a_normal_compile(release_image, tmp_path, scratch_tag, fresh_value, cache_dir):
    patch = tmp_path / "marker.patch"
    patch.write_text(marker_patch(fresh_value))
    dead = f"http://127.0.0.1:{free_port()}/ccache"
    out = builder("derive", "--from", release_image, "--patch", str(patch), "--compile-cache", dead,
                  "--tag", scratch_tag, "--no-test", "-q")
    assert out.returncode == 0, out.stderr
    log = (cache_dir / "logs" / f"derive-{scratch_tag.replace('/', '_').replace(':', '_')}.log").read_text()
    assert f"warning: compile cache {dead} does not answer; compiling without it" in log
    assert marker(scratch_tag) == fresh_value


def test_derive_rebuild_for_other_capabilities_keeps_labels_env_and_binary_in_step(release_image, scratch_tag):
    """--nvbuild-args "--sm 8.6": the derived image's label and env follow what was compiled
    (its conformance run checks labels against the framework's build info and cuobjdump)."""
    out = builder("derive", "--from", release_image, "--nvbuild-args", "--sm 8.6", "--tag", scratch_tag, "-q")
    assert out.returncode == 0, out.stderr[-3000:]
    lab = json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", scratch_tag).stdout)
    assert lab["dev.tfbuilder.cuda-compute-capabilities"] == "8.6"
    info = json.loads(docker("run", "--rm", "--entrypoint", "cat", scratch_tag, "/opt/tensorflow/build-info.json").stdout)
    assert info["cuda_compute_capabilities"] == ["sm_86", "compute_86"]
