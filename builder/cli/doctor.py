"""`builder doctor`: what this machine has for building images, on one screen.

Every fact read from the machine (`docker info`, disk, nvidia-smi, CDI specs, PATH) goes
through a small function that takes its source as an argument, so that tests feed fakes."""

from __future__ import annotations

import math
import os
import shutil
from typing import Callable, Iterable

from builder.catalog import Release
from builder.cli.doctor_gpu import (
    CDI_DIRS,
    GPU_DEVICE,
    gpu_checks,
    nvidia_smi,
)
from builder.cli.doctor_report import Check
from builder.core.errors import UserError
from builder.engine import DockerEngine, buildkit_probe, buildx_version
from builder.engine.buildkit_engine import backend_wanted
from builder.in_image import cuda_arch

# ---- disk: what a cold build of a release takes --------------------------------------
# Peak disk of a cold build (engine emptied, the offline base built too), in GB above the
# free disk at its start. Measured on this project's 2-core machine, Docker 26.1.5 with the
# containerd image store, from tests/conftest.py's "disk used above its start by MODULE"
# lines of `bash .ci/run` on a fresh clone:
# * 26.11: `builder build --release 26.11 --runtime` (devel + runtime, the release's
#   components in), the 26.11 module: 26.6 GB. A devel-only build needs less; this is the
#   upper figure.
# * 21.08: tf2-py3 on the offline base: the base 5.9 GB (test_buildx), then the image on it
#   11.3 GB (test_derived, with DALI and TensorBoard; derives included, so an upper
#   figure): 17.2 GB.
COLD_BUILD_GB: dict[str, float] = {"21.08": 17.2, "26.11": 26.6}
# Releases not measured: the measured release of the same CUDA major (of the offline base,
# the default `--base auto`), else the largest figure. Said to be an estimate.
MEASURED_BY_CUDA_MAJOR = {11: "21.08", 12: "26.11"}
# What the engine must keep free beside the build: tests/integration/conftest.py refuses
# to start below 4 GB ("the engine cannot build or push").
ENGINE_FLOOR_GB = 4.0
SYSTEM_CONTAINERD_ROOT = "/var/lib/containerd"  # a system containerd's store (not dockerd's own)


def checks(release: Release | None = None) -> list[Check]:
    """Every check, against RELEASE where given (disk need, driver minimum), else against the
    largest measured build and every release of the catalog."""
    result: list[Check] = []
    engine_up = False
    info: dict | None = None
    try:
        engine = DockerEngine(timeout=20)
        info = engine.ping()
        version = engine.version()
        result.append(Check("engine", True, f"reachable at {engine.where}, Docker {version.server}"))
        result.append(Check("API version", True, f"{version.api} (client {version.client_api})"))
        storage = info.get("Driver", "?")
        result.append(Check("storage driver", storage in ("overlay2", "overlayfs"), storage))
        result.append(disk_check(release, store_paths(info), disk_free))  # looked up now: tests replace it
        result.append(Check("image store", True, image_store(info), required=False))
        engine_up = True
    except UserError as exc:
        result.append(Check("engine", False, str(exc)))
    buildx = buildx_version()
    result.append(
        Check(
            "buildx",
            bool(buildx),
            buildx or "no `docker buildx` (bash scripts/setup.sh installs Debian 13's docker-buildx)",
            required=False,
        )
    )
    result.append(build_backend_check(buildx))
    if buildx and engine_up:
        for feature in buildkit_probe.probe():
            result.append(Check(f"  {feature.name}", feature.works, feature.detail, required=False))
    for tool, why, required in (
        ("debootstrap", "offline bases", True),
        ("docker-registry", "registry tests", False),
        ("hadolint", "Dockerfile lint", False),
    ):
        path = shutil.which(tool) or (f"/usr/bin/{tool}" if shutil.which(f"/usr/bin/{tool}") else None)
        result.append(Check(tool, path is not None, f"{path or 'missing'} ({why})", required))
    result.append(settings_server_check())
    result.extend(gpu_checks(release, info, nvidia_smi, GPU_DEVICE, CDI_DIRS))
    return result


def build_backend_check(buildx: str) -> Check:
    """Which builder `builder build` uses (builder/buildkit_engine.connect)."""
    try:
        wanted = backend_wanted()
    except UserError as exc:
        return Check("build backend", False, str(exc))
    if wanted == "legacy":
        return Check("build backend", True, "legacy builder (BUILDER_BACKEND=legacy)", required=False)
    if not buildx:
        return Check(
            "build backend",
            False,
            "legacy builder: no buildx, so no BuildKit (bash scripts/setup.sh installs it)",
            required=False,
        )
    return Check("build backend", True, "BuildKit through docker buildx")


def image_store(info: dict) -> str:
    """The engine's image store from `docker info`: the containerd snapshotter (which lets
    BuildKit's default driver export caches and OCI archives) or the classic graph driver."""
    if _containerd_store(info):
        return f"containerd ({info.get('Driver', '?')} snapshotter)"
    return f"classic ({info.get('Driver', '?')} graph driver)"


def _containerd_store(info: dict) -> bool:
    status = dict(tuple(pair) for pair in (info.get("DriverStatus") or []) if len(pair) == 2)
    return status.get("driver-type") == "io.containerd.snapshotter.v1"


def settings_server_check(euid: int | None = None) -> Check:
    """The settings server tells build containers from host processes through other
    processes' /proc/PID/fd, which only root can read; otherwise it can serve no one."""
    root = (os.geteuid() if euid is None else euid) == 0
    return Check(
        "settings server",
        root,
        "can check that callers are build containers"
        if root
        else "not root: it cannot read other processes' /proc/PID/fd, so builds with settings "
        "(--apt-mirror, --pip-index, --ca-bundle, or the default --host-ca) would get none: "
        "use --no-host-ca without settings, or run as root",
        required=False,
    )


# ---- disk ---------------------------------------------------------------------------------
def store_paths(info: dict, exists: Callable[[str], bool] = os.path.isdir) -> list[str]:
    """Where a build writes: the engine's data root (its layers, and BuildKit's state under
    it), and a system containerd's root when images live in containerd (dockerd's own
    containerd keeps them under the data root)."""
    paths = [info.get("DockerRootDir") or "/var/lib/docker"]
    if _containerd_store(info) and exists(SYSTEM_CONTAINERD_ROOT):
        paths.append(SYSTEM_CONTAINERD_ROOT)
    return paths


def disk_free(path: str) -> float | None:
    """Free GB on PATH's file system; None where this machine has no such path (a remote engine)."""
    try:
        return shutil.disk_usage(path).free / 1e9
    except OSError:
        return None


def cold_build_need(release: Release | None) -> tuple[str, float, str]:
    """(release, peak GB, how it is known) of a cold build: RELEASE's measured figure, an
    estimate from the measured release of its CUDA major, or (no release) the largest."""
    largest = max(COLD_BUILD_GB, key=COLD_BUILD_GB.__getitem__)
    if release is None:
        return largest, COLD_BUILD_GB[largest], "the largest measured figure"
    if release.name in COLD_BUILD_GB:
        return release.name, COLD_BUILD_GB[release.name], "measured"
    major = cuda_arch.cuda_major_minor(release.offline.cuda)[0]
    like = MEASURED_BY_CUDA_MAJOR.get(major)
    if like is None:
        return release.name, COLD_BUILD_GB[largest], "an estimate: the largest measured figure"
    return release.name, COLD_BUILD_GB[like], f"an estimate: {like}'s, the same CUDA {major}.x"


def disk_check(release: Release | None, paths: Iterable[str], free: Callable[[str], float | None] = disk_free) -> Check:
    """The least free disk among PATHS against a cold build of RELEASE plus the engine's floor."""
    name, peak, how = cold_build_need(release)
    need = peak + ENGINE_FLOOR_GB
    seen = {p: free(p) for p in paths}
    known = {p: f for p, f in seen.items() if f is not None}
    if not known:
        return Check(
            "free disk",
            False,
            f"cannot see {', '.join(seen)} on this machine (a remote engine?): "
            f"a cold {name} build needs ~{need:.0f} GB free there",
            required=False,
        )
    path = min(known, key=known.__getitem__)
    have = known[path]
    basis = f"{peak:g} GB at its peak, {how}, and {ENGINE_FLOOR_GB:g} GB the engine keeps" + (
        "; --release R checks another release" if release is None else ""
    )
    if have >= need:
        return Check(
            "free disk", True, f"{have:.0f} GB free on {path}; a cold {name} build needs ~{need:.0f} GB ({basis})"
        )
    return Check(
        "free disk",
        False,
        f"needs ~{need:.0f} GB free for a cold {name} build, {have:.0f} GB free on {path} ({basis})",
        advice=f"free {math.ceil(need - have)} GB or more on {path}'s file system: a warm cache needs "
        "less (the base and the locked wheels' layers are reused); `docker builder prune` drops "
        "BuildKit's build cache, `docker image prune` unused images",
    )
