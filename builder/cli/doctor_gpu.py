"""`builder doctor`'s GPU side: the devices nvidia-smi lists, the container runtime that
hands them to containers, and each release's driver contract against the driver found.
Never a reason not to build: every check here is a warning at worst."""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from typing import Callable, Iterable

from builder import catalog
from builder.catalog import Release, Variant
from builder.catalog import driver as driver_contract
from builder.cli.doctor_report import Check, _run, gpu_check
from builder.core.errors import UserError

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
