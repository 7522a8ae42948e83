"""`builder doctor`: what this machine has for building images, on one screen.

Every fact read from the machine (`docker info`, disk, nvidia-smi, CDI specs, PATH) goes
through a small function that takes its source as an argument, so that tests feed fakes."""

from __future__ import annotations

import glob
import math
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, Iterable

from builder import catalog
from builder.catalog import Release, Variant
from builder.catalog import driver as driver_contract
from builder.core.errors import UserError, redact, terminal_line
from builder.engine import DockerEngine, buildkit_probe, buildx_version
from builder.engine.buildkit_engine import backend_wanted
from builder.in_image import cuda_arch

NAME_WIDTH = 18  # the report's name column

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

# ---- GPU facts --------------------------------------------------------------------------
GPU_DEVICE = "/dev/nvidia0"
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")  # CDI's default spec directories
# `docker run --gpus` (what `builder test` runs) calls this hook, looked up on dockerd's PATH
GPUS_HOOK = "nvidia-container-runtime-hook"
# the rest of the NVIDIA container toolkit: alone, no `--gpus` (nvidia-ctk writes CDI specs
# and registers the runtime)
TOOLKIT_TOOLS = ("nvidia-ctk", "nvidia-container-toolkit")
SMI_FIELDS = "index,driver_version,name,compute_cap"
RUNTIME_ADVICE = (
    f"`nvidia-ctk runtime configure --runtime=docker` and restart dockerd (`docker run --gpus all` "
    f"also needs {GPUS_HOOK}, of the nvidia-container-toolkit package, on dockerd's PATH); or CDI: "
    '`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`, `"features": {"cdi": true}` in '
    "daemon.json, and `docker run --device nvidia.com/gpu=all`"
)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True
    advice: str = ""
    info: bool = False  # judges nothing (a skipped check): status "info"
    # GPU side: building needs no GPU, driver or container runtime, so never required;
    # STOPS: when not ok, the images will not run on this machine's GPU (not merely slower)
    gpu: bool = False
    stops: bool = False

    @property
    def status(self) -> str:
        """ok, warn (not required or GPU side, not ok), fail (required, not ok) or info."""
        if self.info:
            return "info"
        if self.ok:
            return "ok"
        return "fail" if self.required and not self.gpu else "warn"


def gpu_check(name: str, ok: bool, detail: str, advice: str = "", stops: bool = False, info: bool = False) -> Check:
    """A GPU-side check: a warning at worst, never a reason not to build."""
    return Check(name, ok, detail, required=False, advice=advice, info=info, gpu=True, stops=stops)


def _run(*cmd: str) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


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


# ---- GPU: the devices, the container runtime, the driver ---------------------------------
@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's
    driver: str
    name: str
    cc: str | None  # "9.0"; None where the driver cannot say (compute_cap came with R510)


def nvidia_smi(which: Callable[[str], str | None] = shutil.which, run: Callable[..., str] = _run) -> str | None:
    """nvidia-smi's CSV of the GPUs (index, driver, name, compute capability); None without
    nvidia-smi. An older driver refuses compute_cap: then asked without it."""
    smi = which("nvidia-smi")
    if not smi:
        return None
    out = run(smi, f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader")
    return out or run(smi, "--query-gpu=index,driver_version,name", "--format=csv,noheader")


def parse_gpus(text: str | None) -> list[Gpu]:
    """The GPUs of nvidia-smi's CSV (index, driver, name[, compute capability]), by index."""
    gpus = []
    for line in (text or "").splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) >= 3 and fields[0].isdigit() and fields[1][:1].isdigit():
            cc = fields[3] if len(fields) > 3 and fields[3][:1].isdigit() else None
            gpus.append(Gpu(int(fields[0]), fields[1], fields[2], cc))
    return sorted(gpus, key=lambda g: g.index)


def gpu_groups(gpus: list[Gpu]) -> dict[tuple[str, str | None], list[int]]:
    """(model, compute capability) -> nvidia-smi's indices of those GPUs, in index order."""
    groups: dict[tuple[str, str | None], list[int]] = {}
    for g in gpus:
        groups.setdefault((g.name, g.cc), []).append(g.index)
    return groups


def gpu_label(indices: list[int]) -> str:
    """'GPU 0-3', 'GPU 1', 'GPU 0,2,5-6': nvidia-smi's indices, runs joined."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return "GPU " + ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def gpu_checks(
    release: Release | None,
    info: dict | None,
    smi: Callable[[], str | None] = nvidia_smi,
    device: str = GPU_DEVICE,
    cdi_dirs: Iterable[str] = CDI_DIRS,
    which: Callable[[str], str | None] = shutil.which,
) -> list[Check]:
    """The GPU lines: skipped where the machine has no GPU; else the container runtime and
    the driver against RELEASE (or against every release of the catalog)."""
    gpus = parse_gpus(smi())
    if not gpus and not os.path.exists(device):
        return [
            gpu_check(
                "GPU",
                True,
                f"none: GPU checks skipped (this machine has no GPU: no nvidia-smi listing one, no {device})",
                info=True,
            )
        ]
    result = [gpu_check("GPU", True, gpu_summary(gpus) or f"{device} exists, but nvidia-smi lists no GPU")]
    result.append(runtime_check(info, cdi_dirs, which))
    if not gpus:
        result.append(
            gpu_check(
                "NVIDIA driver",
                False,
                "unknown: nvidia-smi lists no GPU",
                advice="install the NVIDIA driver's utilities (nvidia-smi) to check it",
            )
        )
    elif release is not None:
        result.extend(release_driver_checks(gpus, release))
    else:
        result.append(catalog_driver_check(gpus[0].driver))
    # building needs none of this: whatever a check above says, a warning at worst
    for c in result:
        c.required, c.gpu = False, True
    return result


def gpu_summary(gpus: list[Gpu]) -> str:
    """'GPU 0-1 NVIDIA H100 80GB HBM3 (9.0); GPU 2 NVIDIA L4 (8.9); driver 550.54.15'."""
    kinds = "; ".join(
        f"{gpu_label(indices)} {name} ({cc or 'capability unknown'})"
        for (name, cc), indices in gpu_groups(gpus).items()
    )
    return f"{kinds}; driver {gpus[0].driver}" if gpus else ""


def runtime_check(
    info: dict | None, cdi_dirs: Iterable[str] = CDI_DIRS, which: Callable[[str], str | None] = shutil.which
) -> Check:
    """Whether `docker run --gpus all` (what `builder test` and users run) gives a container
    the GPU: Docker's `nvidia` runtime registered, or the hook its --gpus calls on PATH. A CDI
    spec of nvidia.com/gpu serves `--device nvidia.com/gpu=all` alone (and only with the
    daemon's cdi feature on, Docker 26), nvidia-ctk alone nothing yet: both warn."""
    info = info or {}
    runtimes = info.get("Runtimes") or {}
    if "nvidia" in runtimes:
        return gpu_check(
            "GPU runtime",
            True,
            f"Docker's nvidia runtime ({runtimes['nvidia'].get('path', '?')}): `docker run --gpus all`",
        )
    hook = which(GPUS_HOOK)
    if hook:
        return gpu_check("GPU runtime", True, f"{hook}: `docker run --gpus all` (where dockerd's PATH has it too)")
    gpus_all = f"`docker run --gpus all` (`builder test`) needs Docker's nvidia runtime or {GPUS_HOOK} on PATH"
    engine_dirs = info.get("CDISpecDirs")
    spec = cdi_spec([*cdi_dirs, *(engine_dirs or [])])
    tool = next((p for p in map(which, TOOLKIT_TOOLS) if p), None)
    if spec or tool:
        has = "; ".join(
            filter(None, [spec and f"CDI spec {spec} (nvidia.com/gpu)", tool and f"{tool} (NVIDIA container toolkit)"])
        )
        cdi = (
            'the engine lists no CDI spec directories: CDI is off (`"features": {"cdi": true}` in '
            "daemon.json turns it on)"
            if engine_dirs is not None and not engine_dirs
            else "CDI works with `--device nvidia.com/gpu=all` where the daemon has CDI enabled"
        )
        return gpu_check("GPU runtime", False, f"{has}, but {gpus_all}: {cdi}", stops=True, advice=RUNTIME_ADVICE)
    engine = "Docker lists no nvidia runtime" if info else "no engine to list its runtimes"
    return gpu_check(
        "GPU runtime",
        False,
        f"a GPU is here but no NVIDIA container runtime: {engine}, no "
        f"{GPUS_HOOK} or {' or '.join(TOOLKIT_TOOLS)} on PATH, no CDI spec names nvidia.com/gpu "
        f"({', '.join(cdi_dirs)}): containers (`builder test`) would see no GPU",
        stops=True,
        advice=f"install nvidia-container-toolkit, then {RUNTIME_ADVICE}",
    )


def cdi_spec(dirs: Iterable[str]) -> str | None:
    """The first CDI spec file (YAML or JSON) in DIRS that names the nvidia.com/gpu kind."""
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "*"))):
            if not path.endswith((".yaml", ".yml", ".json")):
                continue
            try:
                with open(path, errors="replace") as f:
                    if "nvidia.com/gpu" in f.read(1 << 20):
                        return path
            except OSError:
                continue
    return None


def release_driver_checks(gpus: list[Gpu], release: Release) -> list[Check]:
    """The driver against RELEASE's minimum (builder/catalog/driver.py's contract), then each GPU's
    verdict: machine code, PTX JIT (and the driver that needs), or nothing that runs."""
    try:
        contract = driver_contract.contract(
            release, _variant(release), rows=tuple(dict.fromkeys(g.cc for g in gpus if g.cc))
        )
    except (UserError, ValueError) as exc:
        return [gpu_check("NVIDIA driver", False, f"cannot compute {release.name}'s minimum driver: {exc}")]
    have = gpus[0].driver
    result = [_floor_check(have, release.name, contract)]
    for indices in gpu_groups(gpus).values():
        gpu = next(g for g in gpus if g.index == indices[0])
        result.append(_gpu_verdict_check(gpu_label(indices), gpu, have, release.name, contract))
    return result


def _variant(release: Release) -> Variant:
    """The variant the contract is computed for: tf2-py3 where the release has it."""
    return release.variants.get("tf2-py3") or next(iter(release.variants.values()))


def _older(driver: str, than: str) -> bool:
    try:
        return driver_contract.version_key(driver) < driver_contract.version_key(than)
    except ValueError:  # not a dotted number: nothing to say
        return False


def _floor_check(have: str, name: str, contract: driver_contract.Contract) -> Check:
    if _older(have, contract.minimum):
        return gpu_check(
            "NVIDIA driver",
            False,
            f"{have} is older than {name}'s minimum {contract.minimum} "
            f"({contract.minimum_why}): {name}'s images build here but will not run on this "
            "machine's GPUs",
            stops=True,
            advice=f"install an NVIDIA driver {contract.minimum} or newer to run them here, or "
            "run them on another machine",
        )
    return gpu_check("NVIDIA driver", True, f"{have}: {name} needs {contract.minimum} or newer")


def _gpu_verdict_check(label: str, gpu: Gpu, have: str, name: str, contract: driver_contract.Contract) -> Check:
    where = f"{gpu.name} ({gpu.cc or '?'})"
    verdict = contract.verdicts.get(gpu.cc or "")
    if verdict is None:
        return gpu_check(
            label,
            False,
            f"{where}: compute capability unknown (nvidia-smi did not say), so whether "
            f"{name} runs natively is not known",
        )
    if verdict.runs is False:
        return gpu_check(
            label, False, f"{where}: {name} {verdict.text}: its images will not run on this GPU", stops=True
        )
    if verdict.runs is not True:
        return gpu_check(label, False, f"{where}: {name} {verdict.text}")
    if verdict.driver and _older(have, verdict.driver):
        return gpu_check(
            label,
            False,
            f"{where}: driver {have} is older than the {verdict.driver} {name} needs "
            f"on it, so its images will not run on this GPU: {verdict.text}",
            stops=True,
            advice=f"install an NVIDIA driver {verdict.driver} or newer to run them here",
        )
    if verdict.jit:
        return gpu_check(
            label,
            False,
            f"{where}: {name} has no machine code for it, its kernels run by PTX JIT "
            f"(slower first start): {verdict.text}",
        )
    return gpu_check(label, True, f"{where}: {verdict.text}")


def catalog_driver_check(have: str, releases: dict[str, Release] | None = None) -> Check:
    """Without a release: which releases of the catalog the driver runs (their floors)."""
    if releases is None:
        try:
            releases = catalog.load_selected().releases
        except UserError as exc:
            return gpu_check("NVIDIA driver", False, f"{have}; the catalog does not load: {exc}")
    too_old = {}
    for name, release in releases.items():
        try:
            floor = driver_contract.minor_version_floor(driver_contract.library_cuda(release))
        except (UserError, ValueError):
            continue
        if _older(have, floor):
            too_old[name] = floor
    if not too_old:
        return gpu_check(
            "NVIDIA driver", True, f"{have}: at least every release's minimum (--release R checks its GPUs too)"
        )
    return gpu_check(
        "NVIDIA driver",
        False,
        f"{have}: older than the minimum of "
        + ", ".join(f"{n} ({f})" for n, f in too_old.items())
        + ": their images build here but will not run on this "
        "machine's GPUs",
        advice="install a newer NVIDIA driver to run those releases' images here",
    )


# ---- the report ----------------------------------------------------------------------------
def report(items: list[Check]) -> tuple[str, bool]:
    """The report's lines, each as the terminal may show it (errors.terminal_line): a fact
    read from the machine (DOCKER_HOST, an engine's error, a GPU's name) can hold
    credentials, control characters or 10 kB; none reaches the terminal as it is."""
    lines = []
    for c in items:
        mark = {"ok": "ok  ", "fail": "FAIL"}.get(c.status, "--  ")
        lines.append(f"{mark} {c.name:<{NAME_WIDTH}} {c.detail}")
        if c.advice and not c.ok:
            lines.append(f"     {'':<{NAME_WIDTH}} hint: {c.advice}")
    lines.append(summary_line(items))
    return "\n".join(terminal_line(line) for line in lines), is_healthy(items)


def summary_line(items: list[Check]) -> str:
    """The report's last line: whether this machine builds (what doctor's exit status says),
    then, apart, what the GPU warnings mean for running the images here."""
    line = (
        "ready to build"
        if is_healthy(items)
        else "not ready to build: fix the FAIL lines (bash scripts/setup.sh installs what is missing)"
    )
    gpu_warned = [c for c in items if c.gpu and c.status == "warn"]
    if any(c.stops for c in gpu_warned):
        line += " (images will not run on this machine's GPU as it is: see the GPU warnings)"
    elif gpu_warned:
        line += " (see the GPU warnings for running the images here)"
    return line


def is_healthy(items: list[Check]) -> bool:
    """Whether this machine builds: every required check passes (GPU-side checks never are)."""
    return all(c.ok for c in items if c.required and not c.info and not c.gpu)


def report_json(items: list[Check]) -> dict:
    """`builder doctor --json`: every check (name, status ok/warn/fail/info, value, advice)."""
    return {
        "healthy": is_healthy(items),
        "summary": summary_line(items),  # JSON escapes every control
        "checks": [
            {"name": c.name.strip(), "status": c.status, "value": redact(c.detail), "advice": redact(c.advice)}
            for c in items
        ],
    }
