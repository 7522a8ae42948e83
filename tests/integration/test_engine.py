"""The machine's engine as scripts/setup.sh leaves it: a current Docker with buildx, pinned
so that only the engine's three packages come from Debian 13, and `builder doctor`
reporting what that engine's BuildKit can do, each answer from a real probe build; and
the bake definition `builder bake` writes, as buildx reads it."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import builder, docker

TRIXIE_PACKAGES = {"docker.io", "docker-cli", "docker-buildx", "cosign"}  # cosign: builder push --sign


def test_engine_and_cli_are_current_and_buildx_answers():
    server = docker("version", "--format", "{{.Server.Version}}").stdout.strip()
    assert int(server.split(".")[0]) >= 26, server
    buildx = docker("buildx", "version")
    assert buildx.returncode == 0 and re.search(r"\bv?0\.\d+\.\d+", buildx.stdout), buildx.stdout + buildx.stderr


def installed_from(policy: str) -> dict[str, set[str]]:
    """`apt-cache policy PKG...` -> the suites each package's installed version comes from."""
    found, pkg, in_installed = {}, None, False
    for line in policy.splitlines():
        if line and not line.startswith(" "):
            pkg, in_installed = line.rstrip(":"), False
        elif line.startswith(" *** "):
            in_installed = True
            found[pkg] = set()
        elif re.match(r"^ {5}\S", line):  # another version of the same package
            in_installed = False
        elif in_installed:
            m = re.search(r" (\S+?)/\S+ \S+ Packages$", line)  # "... trixie/main amd64 Packages"
            if m:
                found[pkg].add(m.group(1))
    return found


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian machine")
def test_only_the_engines_packages_come_from_trixie():
    """Every installed package whose installed version only trixie's archive has is one of
    the engine's three or cosign (the pin lets nothing else in, not even as a dependency)."""
    names = subprocess.run(
        ["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package}\n"], capture_output=True, text=True, check=True
    ).stdout
    installed = [line.split()[-1] for line in names.splitlines() if line.startswith("ii")]
    policy = subprocess.run(["apt-cache", "policy", *installed], capture_output=True, text=True, timeout=300).stdout
    suites = installed_from(policy)
    assert suites.get("docker.io"), policy[:2000]
    from_trixie = {pkg for pkg, where in suites.items() if where and all(s.startswith("trixie") for s in where)}
    assert from_trixie == TRIXIE_PACKAGES, {p: suites[p] for p in from_trixie}


def only_disk_may_fail(out) -> None:
    """doctor passes, or fails on free disk alone: how much this machine has left after the
    run's images is the machine's state, not what these tests check. The GPU side (a GPU
    without the NVIDIA container toolkit, a driver below a release's minimum) only warns:
    building needs none of it, so it never makes a FAIL line or the exit status 1."""
    lines = out.stdout.splitlines()
    fails = [line for line in lines if line.startswith("FAIL")]
    assert all(line[5:].startswith("free disk") for line in fails), out.stdout + out.stderr
    assert out.returncode == (1 if fails else 0), out.stdout + out.stderr
    assert lines and lines[-1].startswith("not ready to build" if fails else "ready to build"), out.stdout


def test_doctor_reports_the_image_store_and_buildkit_features():
    out = builder("doctor", timeout=300)
    only_disk_may_fail(out)
    from builder.cli.doctor_report import NAME_WIDTH

    lines = {}
    for line in out.stdout.splitlines():
        if line[:4] in ("ok  ", "FAIL", "--  "):
            lines[line[5 : 5 + NAME_WIDTH].strip()] = (line[:4], line[6 + NAME_WIDTH :])
    store = lines["image store"][1]
    features = {name: lines[name] for name in ("cache export", "OCI output", "multi-platform", "bake contexts")}
    # The default (docker) driver exports caches and OCI archives exactly when the engine
    # keeps images in containerd: two observations that must agree.
    containerd = store.startswith("containerd")
    assert (features["cache export"][0] == "ok  ") == containerd, (store, features)
    assert (features["OCI output"][0] == "ok  ") == containerd, (store, features)
    for mark, detail in features.values():
        assert detail == "works" if mark == "ok  " else detail and detail != "works"


def test_doctor_on_a_containerd_store_engine_finds_every_feature():
    """The same probes on an engine that keeps images in containerd (started here, on its own
    socket and network namespace): the default driver then exports caches and OCI archives,
    builds for two platforms and resolves bake target contexts."""
    from builder.cli.doctor_report import NAME_WIDTH

    from .engines import second_engine

    with second_engine({"features": {"containerd-snapshotter": True}}) as env:
        out = builder("doctor", env=env, timeout=300)
    only_disk_may_fail(out)
    rows = {line[5 : 5 + NAME_WIDTH].strip(): line for line in out.stdout.splitlines()}
    assert rows["image store"].endswith("containerd (overlayfs snapshotter)"), out.stdout
    for feature in ("cache export", "OCI output", "multi-platform", "bake contexts"):
        assert rows[feature].startswith("ok  ") and rows[feature].endswith(" works"), out.stdout


def test_buildx_reads_the_bake_definition(tmp_path):
    """`builder bake` writes contexts and a definition that buildx itself resolves: the
    variant takes its base from the base target (pulled in although not asked for)."""
    import json

    from builder import catalog
    from builder.render.base_recipe import BaseRecipe

    out = builder("bake", "--release", "21.08", "-o", str(tmp_path / "bake"), "--build-id", "itest", timeout=300)
    assert out.returncode == 0, out.stderr
    path = out.stdout.strip()
    assert path == str(tmp_path / "bake" / "docker-bake.json")
    printed = docker("buildx", "bake", "-f", path, "--print", "--progress=quiet")
    assert printed.returncode == 0, printed.stderr
    targets = json.loads(printed.stdout)["target"]
    base_tag = BaseRecipe(catalog.load().get("21.08").offline).tag
    assert targets["21-08-tf2-py3"]["contexts"] == {base_tag: "target:base-21-08"}
    assert targets["21-08-tf2-py3"]["args"]["BASE_IMAGE"] == base_tag
    for t in targets.values():
        assert "tags" not in t
        assert (Path(t["context"]) / "Dockerfile").is_file()
    assert "FROM ${BASE_IMAGE}" in (Path(targets["21-08-tf2-py3"]["context"]) / "Dockerfile").read_text()
    assert "FROM ${ROOTFS_IMAGE}" in (Path(targets["base-21-08"]["context"]) / "Dockerfile").read_text()


def test_bake_refuses_bad_input_in_one_line(tmp_path):
    out = builder("bake", "--release", "99.99", "-o", str(tmp_path / "b"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "b").exists()
    out = builder("bake", "--release", "21.08", "-o", str(tmp_path / "b"), "--build-id", "no spaces")
    assert out.returncode == 2 and "--build-id" in out.stderr, out.stderr
    assert not (tmp_path / "b").exists()
