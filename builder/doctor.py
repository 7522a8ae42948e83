"""`builder doctor`: what this machine has for building images, on one screen."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from builder import buildkit_probe
from builder.buildkit_engine import backend_wanted
from builder.engine import DockerEngine, buildx_version
from builder.errors import UserError

NAME_WIDTH = 18  # the report's name column
MIN_FREE_GB = 30  # an offline base (~6 GB) plus a release image and its build cache


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True


def _run(*cmd: str) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def checks() -> list[Check]:
    result: list[Check] = []
    engine_up = False
    try:
        engine = DockerEngine(timeout=20)
        info = engine.ping()
        version = engine.version()
        result.append(Check("engine", True, f"reachable at {engine.where}, Docker {version.server}"))
        result.append(Check("API version", True, f"{version.api} (client {version.client_api})"))
        driver = info.get("Driver", "?")
        result.append(Check("storage driver", driver in ("overlay2", "overlayfs"), driver))
        root = info.get("DockerRootDir", "/var/lib/docker")
        free = shutil.disk_usage(root).free / 1e9
        result.append(Check("free disk", free >= MIN_FREE_GB, f"{free:.0f} GB free under {root} (want {MIN_FREE_GB})"))
        result.append(Check("image store", True, image_store(info), required=False))
        engine_up = True
    except UserError as exc:
        result.append(Check("engine", False, str(exc)))
    buildx = buildx_version()
    result.append(Check("buildx", bool(buildx), buildx or "no `docker buildx` (bash scripts/setup.sh installs "
                        "Debian 13's docker-buildx)", required=False))
    result.append(build_backend_check(buildx))
    if buildx and engine_up:
        for feature in buildkit_probe.probe():
            result.append(Check(f"  {feature.name}", feature.works, feature.detail, required=False))
    for tool, why, required in (("debootstrap", "offline bases", True), ("docker-registry", "registry tests", False),
                                ("hadolint", "Dockerfile lint", False)):
        path = shutil.which(tool) or (f"/usr/bin/{tool}" if shutil.which(f"/usr/bin/{tool}") else None)
        result.append(Check(tool, path is not None, f"{path or 'missing'} ({why})", required))
    result.append(settings_server_check())
    gpus = _run("nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader")
    result.append(Check("GPU", bool(gpus), gpus.replace("\n", "; ") or "none (GPU-only checks are skipped)",
                        required=False))
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
        return Check("build backend", False, "legacy builder: no buildx, so no BuildKit (bash scripts/setup.sh "
                     "installs it)", required=False)
    return Check("build backend", True, "BuildKit through docker buildx")


def image_store(info: dict) -> str:
    """The engine's image store from `docker info`: the containerd snapshotter (which lets
    BuildKit's default driver export caches and OCI archives) or the classic graph driver."""
    status = dict(tuple(pair) for pair in (info.get("DriverStatus") or []) if len(pair) == 2)
    if status.get("driver-type") == "io.containerd.snapshotter.v1":
        return f"containerd ({info.get('Driver', '?')} snapshotter)"
    return f"classic ({info.get('Driver', '?')} graph driver)"


def settings_server_check(euid: int | None = None) -> Check:
    """The settings server tells build containers from host processes through other
    processes' /proc/PID/fd, which only root can read; otherwise it can serve no one."""
    import os

    root = (os.geteuid() if euid is None else euid) == 0
    return Check("settings server", root,
                 "can check that callers are build containers" if root else
                 "not root: it cannot read other processes' /proc/PID/fd, so builds with settings "
                 "(--apt-mirror, --pip-index, --ca-bundle, or the default --host-ca) would get none: "
                 "use --no-host-ca without settings, or run as root", required=False)


def report(items: list[Check]) -> tuple[str, bool]:
    lines = []
    for c in items:
        mark = "ok  " if c.ok else ("FAIL" if c.required else "--  ")
        lines.append(f"{mark} {c.name:<{NAME_WIDTH}} {c.detail}")
    healthy = all(c.ok for c in items if c.required)
    lines.append("ready to build" if healthy else "not ready: fix the FAIL lines (bash scripts/setup.sh installs what is missing)")
    return "\n".join(lines), healthy
