"""The machine's engine as scripts/setup.sh leaves it: a current Docker with buildx, pinned
so that only the engine's three packages come from Debian 13, and `builder doctor`
reporting what that engine's BuildKit can do, each answer from a real probe build."""
import re
import shutil
import subprocess

import pytest

from .conftest import builder, docker

TRIXIE_PACKAGES = {"docker.io", "docker-cli", "docker-buildx"}


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
        elif re.match(r"^ {5}\S", line):           # another version of the same package
            in_installed = False
        elif in_installed:
            m = re.search(r" (\S+?)/\S+ \S+ Packages$", line)  # "... trixie/main amd64 Packages"
            if m:
                found[pkg].add(m.group(1))
    return found


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian machine")
def test_only_the_engines_packages_come_from_trixie():
    """Every installed package whose installed version only trixie's archive has is one of
    the engine's three (the pin lets nothing else in, not even as a dependency)."""
    names = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package}\n"],
                           capture_output=True, text=True, check=True).stdout
    installed = [line.split()[-1] for line in names.splitlines() if line.startswith("ii")]
    policy = subprocess.run(["apt-cache", "policy", *installed], capture_output=True, text=True, timeout=300).stdout
    suites = installed_from(policy)
    assert suites.get("docker.io"), policy[:2000]
    from_trixie = {pkg for pkg, where in suites.items()
                   if where and all(s.startswith("trixie") for s in where)}
    assert from_trixie == TRIXIE_PACKAGES, {p: suites[p] for p in from_trixie}


def test_doctor_reports_the_image_store_and_buildkit_features():
    out = builder("doctor", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    from builder.doctor import NAME_WIDTH

    lines = {}
    for line in out.stdout.splitlines():
        if line[:4] in ("ok  ", "FAIL", "--  "):
            lines[line[5:5 + NAME_WIDTH].strip()] = (line[:4], line[6 + NAME_WIDTH:])
    store = lines["image store"][1]
    features = {name: lines[name] for name in ("cache export", "OCI output", "multi-platform", "bake contexts")}
    # The default (docker) driver exports caches and OCI archives exactly when the engine
    # keeps images in containerd: two observations that must agree.
    containerd = store.startswith("containerd")
    assert (features["cache export"][0] == "ok  ") == containerd, (store, features)
    assert (features["OCI output"][0] == "ok  ") == containerd, (store, features)
    for mark, detail in features.values():
        assert detail == "works" if mark == "ok  " else detail and detail != "works"
