"""The driver contract: the oldest NVIDIA driver a release's image runs on, and how each
GPU of the fleet runs it, computed from the catalog alone (pure: no engine, no image).

What runs on a GPU in an image, and what each part asks of the driver:

* **Machine code (SASS)** of CUDA X.y libraries runs on any driver of CUDA X's
  minor-version-compatibility range, whatever y (11.x from 450.80.02, 12.x from 525.60.13,
  13.x from 580): the image's CUDA libraries (NVIDIA's wheels or the base's toolkit), and
  every kernel built for the GPU's architecture. That floor is the image's minimum driver:
  NVIDIA_REQUIRE_CUDA, the label and the banner say it.
* **PTX** is compiled by the driver when the GPU has no machine code for a kernel (JIT).
  The driver must know the PTX's ISA version (its `.version`), which the compiler that
  wrote it set: PTX from CUDA 12.4's nvcc is ISA 8.4 and needs a driver of CUDA 12.4 or
  newer (550.54.14); TensorFlow 2.21's compute_90 PTX, built with CUDA 12.5.1 by clang 18,
  is ISA 8.3 (measured), which a CUDA 12.3 driver reads (545.23.06). Minor-version
  compatibility does not cover PTX: an older driver refuses it
  (CUDA_ERROR_UNSUPPORTED_PTX_VERSION). So on a GPU that JITs something the minimum is the
  higher of the floor and the driver of that ISA (per GPU in the verdicts; "ptx_jit": the
  newest ISA the image carries, wherever it is JIT-compiled).
* **The GPU itself** needs a driver that knows it: at least the driver of the first CUDA
  toolkit that compiles for its architecture (Blackwell, 10.0 and 12.0: CUDA 12.8, R570).

A GPU's minimum is the highest of the three that apply to it. Which GPUs JIT what is
computed the way `builder inspect --coverage` reads it from an image: TensorFlow's kernels
from the catalog's record of its wheel (framework.device_code), the image's own CUDA code
(extension, Horovod) from the release's compute capabilities and toolkits, and the CUDA
libraries by the architectures their toolkit compiles (a library is taken to carry machine
code for every one of them and no PTX counted on: the libraries of a CUDA too old for a
GPU do not run it; measured, 21.08's cuDNN 8.5 wheel has SASS up to sm_86 and PTX only for
compute_70, its NCCL 2.13 none beyond sm_80).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import yaml

from builder.catalog import DEBIAN_SUITES, DeviceCode, Release, Variant, policy
from builder.core.errors import UserError
from builder.core.grammar import PIN
from builder.in_image import cuda_arch

# ---- facts --------------------------------------------------------------------------
# The Linux x86_64 "Toolkit Driver Version" of each CUDA release's GA, and the PTX ISA
# version its nvcc writes. Source: NVIDIA CUDA Toolkit Release Notes, Table 3 "CUDA Toolkit
# and Corresponding Driver Versions" (docs.nvidia.com/cuda/cuda-toolkit-release-notes), and
# the PTX ISA release history (PTX ISA manual, "Release Notes"; NVIDIA's cuda-python
# `_ptx_utils` maps ISA to CUDA the same way: 8.5 is 12.5 and 12.6, 8.6 was 12.7, which was
# never released, 8.7 is 12.8, 8.8 is 12.9).
TOOLKIT_DRIVERS: dict[tuple[int, int], tuple[str, str]] = {
    (9, 0): ("384.81", "6.0"),
    (10, 0): ("410.48", "6.3"),
    (10, 1): ("418.39", "6.4"),
    (10, 2): ("440.33", "6.5"),
    (11, 0): ("450.51.05", "7.0"),  # 11.0.2 GA (11.0.1 RC: 450.36.06)
    (11, 1): ("455.23", "7.1"),
    (11, 2): ("460.27.03", "7.2"),
    (11, 3): ("465.19.01", "7.3"),
    (11, 4): ("470.42.01", "7.4"),
    (11, 5): ("495.29.05", "7.5"),
    (11, 6): ("510.39.01", "7.6"),
    (11, 7): ("515.43.04", "7.7"),
    (11, 8): ("520.61.05", "7.8"),
    (12, 0): ("525.60.13", "8.0"),
    (12, 1): ("530.30.02", "8.1"),
    (12, 2): ("535.54.03", "8.2"),
    (12, 3): ("545.23.06", "8.3"),
    (12, 4): ("550.54.14", "8.4"),
    (12, 5): ("555.42.02", "8.5"),
    (12, 6): ("560.28.03", "8.5"),
    (12, 8): ("570.26", "8.7"),
    (12, 9): ("575.51.03", "8.8"),
    (13, 0): ("580.65.06", "9.0"),
}
# CUDA minor version compatibility: the oldest driver that runs (the machine code of) any
# X.y application or library of the major. Same release notes, Table 2 "CUDA Toolkit and
# Minimum Required Driver Version for CUDA Minor Version Compatibility" (11.x: ">= 450",
# with 450.80.02 named by its footnote; 12.x: ">= 525", 12.0 GA's 525.60.13; 13.x: ">= 580").
MINOR_VERSION_FLOOR = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def version_key(driver: str) -> tuple[int, ...]:
    """'570.26' < '570.124.06': drivers compare field by field, as libnvidia-container does."""
    return tuple(int(p) for p in driver.split("."))


def newest(*drivers: str) -> str:
    return max(drivers, key=version_key)


def toolkit_driver(cuda: str) -> str:
    """The driver of CUDA CUDA's release (its GA), the newest known one at or below it."""
    mm = cuda_arch.cuda_major_minor(cuda)
    known = [k for k in TOOLKIT_DRIVERS if k <= mm]
    if not known:
        raise ValueError(f"CUDA {cuda} is older than any toolkit driver this builder knows (9.0)")
    return TOOLKIT_DRIVERS[max(known)][0]


def ptx_isa(cuda: str) -> str:
    """The PTX ISA version CUDA CUDA's nvcc writes ('12.4.1' -> '8.4')."""
    mm = cuda_arch.cuda_major_minor(cuda)
    return TOOLKIT_DRIVERS[max(k for k in TOOLKIT_DRIVERS if k <= mm)][1]


def jit_driver(cuda: str) -> str:
    """The oldest driver that JIT-compiles PTX written by CUDA CUDA's nvcc (PTX from 12.6 is
    ISA 8.5, which 12.5's driver reads)."""
    return isa_driver(ptx_isa(cuda))


def isa_driver(isa: str) -> str:
    """The oldest driver that JIT-compiles PTX of ISA ISA: the driver of the first toolkit
    that writes it (a driver refuses a newer ISA than it knows)."""
    known = [k for k, (_, i) in TOOLKIT_DRIVERS.items() if version_key(i) >= version_key(isa)]
    if not known:
        raise UserError(
            f"PTX ISA {isa} is newer than any CUDA toolkit this builder knows the driver of "
            f"(builder/catalog/driver.py: up to ISA {max(TOOLKIT_DRIVERS.values())[1]})"
        )
    return TOOLKIT_DRIVERS[min(known)][0]


def minor_version_floor(cuda: str) -> str:
    major = cuda_arch.cuda_major_minor(cuda)[0]
    if major not in MINOR_VERSION_FLOOR:
        raise ValueError(f"no minor-version compatibility floor known for CUDA {major}.x")
    return MINOR_VERSION_FLOOR[major]


def gpu_driver(arch: str) -> tuple[str, str] | None:
    """(driver, CUDA release) a GPU of ARCH needs at least: the driver of the first CUDA
    toolkit that compiles for it (Blackwell: 12.8, 570.26); None when no toolkit does."""
    first = cuda_arch.first_toolkit_for(cuda_arch.order(arch))
    return (toolkit_driver(first), first) if first else None


# ---- what an image holds, from the catalog --------------------------------------------
@dataclass(frozen=True)
class Code:
    """Device code of one part of the image: machine code for SASS, PTX of ISA `isa` for
    PTX (X.Y capabilities), built with the CUDA toolkit CUDA."""

    what: str
    cuda: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    isa: str = ""

    def runs(self, arch: str) -> tuple[str, str]:
        """("sass", "sm_80"), ("ptx", "compute_90") or ("none", "") on a GPU of ARCH."""
        return cuda_arch.coverage(arch, [_digits(a) for a in self.sass], [_digits(a) for a in self.ptx])


def _digits(arch: str) -> str:
    return cuda_arch.order(arch).digits


def library_cuda(release: Release) -> str:
    """The CUDA version (MAJOR.MINOR) of the CUDA libraries TensorFlow loads in the image:
    NVIDIA's CUDA runtime wheel's where every library comes from wheels (26.11: 12.9), else
    the base's toolkit, the older of the two bases (NVIDIA's upstream image, the offline base)."""
    if policy.cuda_from_wheels(release):
        m = PIN.fullmatch(release.gpu_wheels["cuda_runtime"])
        return ".".join(m.group(2).split(".")[:2])  # type: ignore[union-attr]
    oldest = min((release.cuda, release.offline.cuda), key=cuda_arch.cuda_major_minor)
    return "%d.%d" % cuda_arch.cuda_major_minor(oldest)


def libraries_code(release: Release) -> Code:
    """The CUDA libraries: all of one CUDA release where NVIDIA's wheels bring them
    ("cuDNN/cuBLAS 12.9"), else the base toolkit's and NVIDIA's wheels of one major."""
    cuda = library_cuda(release)
    what = (
        f"cuDNN/cuBLAS {cuda}"
        if policy.cuda_from_wheels(release)
        else f"CUDA {cuda_arch.cuda_major_minor(cuda)[0]}.x cuDNN/cuBLAS"
    )
    return Code(what, cuda, tuple(str(a) for a in cuda_arch.supported_archs(cuda)), ())


def framework_code(variant: Variant) -> Code | None:
    """TensorFlow's own kernels, as the catalog records its wheel (framework.device_code)."""
    dc: DeviceCode | None = variant.device_code
    if dc is None:
        return None
    return Code(f"{variant.framework_name}'s kernels", dc.cuda, dc.sass, dc.ptx, dc.ptx_isa)


def own_code(release: Release, cuda_cc: list[str] | None = None) -> Code:
    """What nvbuild.sh compiles (the extension, Horovod): machine code for the release's
    capabilities that the base's nvcc compiles (or the nvcc wheel's ptxas assembles), PTX
    of the newest nvcc compiles, written by the newer of the two bases' toolkits (the one
    whose PTX asks more of the driver)."""
    cc = release.cuda_cc if cuda_cc is None else cuda_cc
    toolkits = (release.cuda, release.offline.cuda)
    oldest = min(toolkits, key=lambda t: cuda_arch.supported_archs(t)[-1])
    newest_toolkit = max(toolkits, key=cuda_arch.cuda_major_minor)
    nvcc = {str(a) for a in cuda_arch.supported_archs(oldest)}
    ptxas = getattr(release, "ptxas", None)
    assembled = set(cuda_arch.assembled(cc, oldest, ptxas)) if ptxas else set()
    sass = tuple(a for a in cc if a in nvcc or a in assembled)
    compiled_by_nvcc = [a for a in cc if a in nvcc]
    # the PTX nvcc embeds: its newest listed, else (all assembled) its own newest (gencode_flags)
    ptx = (
        (max(compiled_by_nvcc, key=cuda_arch.order),)
        if compiled_by_nvcc
        else ((str(cuda_arch.supported_archs(oldest)[-1]),) if assembled else ())
    )
    return Code("the image's own CUDA code (extension, Horovod)", newest_toolkit, sass, ptx, ptx_isa(newest_toolkit))


# ---- the contract -----------------------------------------------------------------------
@dataclass(frozen=True)
class GpuVerdict:
    """Whether, and on which driver, one GPU architecture runs the image."""

    arch: str
    runs: bool | None  # None: TensorFlow's device code is not in the catalog
    driver: str | None  # the oldest driver this GPU runs the image on
    jit: tuple[str, ...]  # what runs by PTX JIT on it
    text: str


@dataclass(frozen=True)
class Contract:
    release: str
    variant: str
    library_cuda: str
    minimum: str  # the floor: every GPU running machine code only
    minimum_why: str
    ptx_jit: str | None  # where something runs by PTX JIT: max(floor, its toolkits' drivers)
    ptx_jit_why: str
    framework_jit_driver: str | None  # TensorFlow's PTX (the entrypoint's JIT warning)
    own_jit_driver: str | None  # the image's own PTX
    verdicts: dict[str, GpuVerdict] = field(default_factory=dict)
    platforms: str = ""  # policy.platforms_served, in one line

    @property
    def require_cuda(self) -> str:
        """NVIDIA_REQUIRE_CUDA: the NVIDIA container toolkit refuses to start the container
        on an older driver (comma: and)."""
        return f"cuda>={cuda_arch.cuda_major_minor(self.library_cuda)[0]}.0,driver>={self.minimum}"

    @property
    def jit_gpus(self) -> list[str]:
        return [a for a, v in self.verdicts.items() if v.runs and v.jit]

    def summary(self) -> dict:
        """What `builder show` prints (and its --json)."""
        return {
            "minimum_driver": self.minimum,
            "minimum_driver_why": self.minimum_why,
            "ptx_jit_driver": self.ptx_jit,
            "ptx_jit_driver_why": self.ptx_jit_why,
            "nvidia_require_cuda": self.require_cuda,
            "gpus": {a: v.text for a, v in self.verdicts.items()},
            "platforms": self.platforms,
        }


def contract(
    release: Release,
    variant: Variant,
    rows: tuple[str, ...] | list[str] = cuda_arch.FLEET,
    cuda_cc: list[str] | None = None,
) -> Contract:
    """The driver contract of one release variant, with a verdict per GPU of ROWS; CUDA_CC:
    the capabilities nvbuild.sh compiles, when not the release's."""
    libs = libraries_code(release)
    floor = minor_version_floor(libs.cuda)
    major = cuda_arch.cuda_major_minor(libs.cuda)[0]
    if policy.cuda_from_wheels(release):
        whose = f"NVIDIA's CUDA {libs.cuda} wheels"
    else:
        toolkits = sorted({release.cuda, release.offline.cuda}, key=cuda_arch.cuda_major_minor)
        whose = f"the base's CUDA {' or '.join(toolkits)} and NVIDIA's cu{major} wheels"
    why = f"CUDA {major}.x minor version compatibility: the CUDA libraries are {whose}; machine code only"
    framework, own = framework_code(variant), own_code(release, cuda_cc)
    fw_jit = isa_driver(framework.isa) if framework and framework.ptx else None
    own_jit = isa_driver(own.isa) if own.ptx else None
    verdicts = {a: _verdict(a, floor, libs, framework, own) for a in rows}
    ptx_parts = [
        (
            d,
            f"{c.what}: {', '.join('compute_' + _digits(p) for p in c.ptx)}, PTX ISA {c.isa} "
            f"(built with CUDA {c.cuda}), needs {d}",
        )
        for d, c in ((fw_jit, framework), (own_jit, own))
        if d and c
    ]
    if ptx_parts:
        ptx_jit: str | None = newest(floor, *(d for d, _ in ptx_parts))
        jit_gpus = [a for a, v in verdicts.items() if v.runs and v.jit]
        where = f"of the GPUs below: {', '.join(jit_gpus)}" if jit_gpus else "none of the GPUs below"
        ptx_why = (
            f"on a GPU that JIT-compiles kernels from PTX ({where}), the newest PTX ISA the image carries "
            "decides: " + "; ".join(t for _, t in ptx_parts)
        )
    else:
        ptx_jit, ptx_why = None, "the image carries no PTX"
    served = policy.platforms_served(release)
    platforms = ", ".join(p for p, why in served.items() if why is None) + "".join(
        f" ({p}: no — {why})" for p, why in served.items() if why is not None
    )
    return Contract(
        release.name, variant.name, libs.cuda, floor, why, ptx_jit, ptx_why, fw_jit, own_jit, verdicts, platforms
    )


def _verdict(arch: str, floor: str, libs: Code, framework: Code | None, own: Code) -> GpuVerdict:
    lib_kind, lib_from = libs.runs(arch)
    if lib_kind == "none":
        # a model, not a measurement: `builder inspect IMAGE --coverage` reads each library
        # (21.08 on 12.0: NCCL 2.13 none at all, cuDNN 8.5 PTX in 166 of 1918 modules)
        return GpuVerdict(
            arch,
            False,
            None,
            (),
            f"cannot run — its {libs.what} are built for GPUs up to "
            f"{libs.sass[-1]} (CUDA {libs.cuda}), not for {arch}; "
            "`builder inspect IMAGE --coverage` lists what each holds",
        )
    if framework is None:
        return GpuVerdict(
            arch,
            None,
            None,
            (),
            "unknown — the catalog records no device code for this framework's wheel (framework.device_code)",
        )
    fw_kind, fw_from = framework.runs(arch)
    if fw_kind == "none":
        return GpuVerdict(arch, False, None, (), f"cannot run — {framework.what} carry no code for {arch}")
    parts = [f"{libs.what} SASS"]
    needs = [(floor, "")]
    jit = []
    if fw_kind == "sass":
        parts.append(f"{framework.what}: SASS {fw_from}")
    else:
        parts.append(f"{framework.what} by PTX JIT from {fw_from}")
        needs.append((isa_driver(framework.isa), f"the JIT of PTX ISA {framework.isa} needs"))
        jit.append("framework")
    own_kind, own_from = own.runs(arch)
    if own_kind == "ptx":
        parts.append(f"{own.what} by PTX JIT from {own_from}")
        needs.append((isa_driver(own.isa), f"the JIT of PTX ISA {own.isa} needs"))
        jit.append("own")
    elif own_kind == "none":
        parts.append(f"{own.what}: no code")
    gpu = gpu_driver(arch)
    if gpu:
        needs.append((gpu[0], f"the GPU needs CUDA {gpu[1]}'s driver,"))
    driver = newest(*(d for d, _ in needs))
    reasons = [f"{why} {d}" for d, why in needs if why and version_key(d) > version_key(floor)]
    text = f"runs ({'; '.join(parts)}); driver >= {driver}" + (f" ({'; '.join(reasons)})" if reasons else "")
    return GpuVerdict(arch, True, driver, tuple(jit), text)


def contracts(release: Release) -> dict[str, Contract]:
    """One contract per variant the catalog can tell about (buildable ones first)."""
    ok, _ = policy.buildable_variants(release)
    return {v.name: contract(release, v) for v in ok}


class _Dumper(yaml.SafeDumper):
    """Double quotes for text with an apostrophe ("TensorFlow's"), not '' inside '...'."""


_Dumper.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if "'" in value else None),
)


def bases(release: Release) -> dict[str, dict[str, str]]:
    """The two bases a release's images can stand on and what each gives the image: OS,
    Python, the CUDA toolkit, and the CUDA of the libraries TensorFlow loads (NVIDIA's
    wheels where they bring them all). `--base auto` is the offline one on every machine,
    so a tag names one of them, never either (`builder releases`, `builder show`)."""
    all_wheels = library_cuda(release) if policy.cuda_from_wheels(release) else None
    # the libraries NVIDIA's wheels bring beside a toolkit's ("cuDNN 8.5.0.96, NCCL 2.13.4")
    named = {"cudnn": "cuDNN", "nccl": "NCCL", "cublas": "cuBLAS"}
    pins = {k: PIN.fullmatch(w) for k, w in release.gpu_wheels.items() if k in named}
    some = ", ".join(f"{named[k]} {pin.group(2)}" for k, pin in pins.items() if pin)
    suite = release.offline.debian

    def one(os_name: str, python: str, toolkit: str, image: str, chosen_by: str) -> dict[str, str]:
        libs = (
            f"{all_wheels} (NVIDIA's wheels)"
            if all_wheels
            else f"{toolkit} (the toolkit's)" + (f"; {some} from NVIDIA's wheels" if some else "")
        )
        return {
            "os": os_name,
            "python": python,
            "cuda_toolkit": toolkit,
            "cuda_libraries": libs,
            "image": image,
            "chosen_by": chosen_by,
        }

    return {
        "offline": one(
            f"Debian {DEBIAN_SUITES.get(suite, '?')} ({suite})",
            release.offline.python,
            release.offline.cuda,
            "built here: debootstrap + Debian's CUDA toolkit",
            "--base auto (the default) or --base offline",
        ),
        "upstream": one(
            f"{release.os_distro.capitalize()} {release.os_version}",
            release.python,
            release.cuda,
            release.upstream_ref,
            "--base upstream (pulled; its tags carry the OS)",
        ),
    }


def show_text(release: Release, as_json: bool = False) -> str:
    """`builder show`: the resolved release, then what is computed from it (not catalog keys):
    the two bases, and each variant's driver contract."""
    computed = {"bases": bases(release), **{name: c.summary() for name, c in contracts(release).items()}}
    if as_json:
        spec = json.loads(release.spec_text(as_json=True))
        return json.dumps({**spec, "computed": computed}, indent=2, sort_keys=False) + "\n"
    text = yaml.dump({"computed": computed}, Dumper=_Dumper, sort_keys=False, width=1 << 16, allow_unicode=True)
    return release.spec_text() + "# computed from the catalog by builder/catalog/driver.py (not catalog keys):\n" + text


def minimum_text(c: Contract) -> str:
    """The banner's line: the minimum, and what PTX JIT asks where a GPU needs it."""
    line = f"{c.minimum} or newer (CUDA {cuda_arch.cuda_major_minor(c.library_cuda)[0]}.x minor version compatibility)"
    if c.ptx_jit and c.jit_gpus:
        line += f"; {c.ptx_jit} or newer where kernels are JIT-compiled from PTX ({', '.join(c.jit_gpus)})"
    return line
