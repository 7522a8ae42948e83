"""The validated catalog records other stages read: a Release, its Variants and the specs
of what it installs, frozen. builder/catalog/validate.py builds them from the release
models (builder/catalog/schema.py) once a release passes them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from builder.core import contract
from builder.core.errors import UserError
from builder.core.grammar import printable

# The labels the vendor fills (OCI annotations, and Docker's legacy `maintainer`, which
# upstream CUDA bases set to NVIDIA: overwritten so an image never inherits it).
LABEL_VENDOR = contract.Label.VENDOR
LABEL_AUTHORS = contract.Label.AUTHORS
LABEL_URL = "org.opencontainers.image.url"
LABEL_MAINTAINER = "maintainer"
VENDOR_LABELS = {
    LABEL_VENDOR: "vendor.name",
    LABEL_AUTHORS: "vendor.maintainer",
    LABEL_URL: "vendor.url",
    LABEL_MAINTAINER: "vendor.maintainer (or vendor.name)",
}
TOGGLES = ("xla", "gcp", "hdfs")


@dataclass(frozen=True)
class OfflineBase:
    debian: str
    cuda: str
    python: str


def python_key(version: str) -> tuple[int, ...]:
    """Sort key for "3.9" < "3.10"."""
    return tuple(int(p) for p in version.split("."))


@dataclass(frozen=True)
class DeviceCode:
    """The device code of the framework's wheel as measured (cuobjdump --list-elf /
    --list-ptx / -ptx on its libraries): machine code for `sass`, PTX for `ptx` (X.Y
    capabilities) of ISA `ptx_isa` (the PTX's `.version`, which decides the driver that
    JIT-compiles it; the compiler sets it, not only the toolkit: TensorFlow 2.21's clang
    writes 8.3 with CUDA 12.5.1), built with CUDA `cuda`. `version` is the framework version
    it was measured on: a release that changes the version must measure again
    (builder/catalog/driver.py computes the driver contract and the GPU verdicts from it)."""

    version: str
    cuda: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    ptx_isa: str = ""


@dataclass(frozen=True)
class Variant:
    name: str
    tag: str
    framework_name: str
    framework_version: str
    api: int
    env: dict[str, str]
    labels: dict[str, str]
    # The upstream wheel: its pip distribution (None: the catalog names none), the Pythons
    # it is published for, and the known-good exact pins installed with it.
    package: str | None = None
    pythons: tuple[str, ...] = ()
    pins: tuple[str, ...] = ()
    device_code: DeviceCode | None = None  # the wheel's kernels (framework.device_code)

    @property
    def short(self) -> str:
        """'tf2' for 'tf2-py3': the variant as NGC's release string spells it."""
        return self.name.split("-")[0]


def ptxas_version(requirement: str | None) -> str | None:
    """'nvidia-cuda-nvcc-cu12==12.9.86' -> '12.9' (the wheel's version is its toolkit's)."""
    m = re.fullmatch(r"nvidia-cuda-nvcc(?:-cu\d+)?==(\d+\.\d+)(?:\.\S*)?", requirement or "")
    return m.group(1) if m else None


@dataclass(frozen=True)
class Vendor:
    """Who makes the image: the name the banner and labels give as its maker, and the
    holder of the image's copyright line (none unless the catalog names one)."""

    name: str
    maintainer: str | None = None
    url: str | None = None
    copyright_holder: str | None = None

    @property
    def is_nvidia(self) -> bool:
        """NVIDIA's own image (the NGC banner and NVIDIA's modification notices): the
        catalog says so by a copyright holder whose first word is NVIDIA."""
        return bool(re.match(r"NVIDIA\b", self.copyright_holder or "", re.IGNORECASE))

    def labels(self) -> dict[str, str]:
        """The image's labels naming its maker: vendor, and authors and url when given."""
        out = {LABEL_VENDOR: self.name, LABEL_MAINTAINER: self.maintainer or self.name}
        if self.maintainer:
            out[LABEL_AUTHORS] = self.maintainer
        if self.url:
            out[LABEL_URL] = self.url
        return out


@dataclass(frozen=True)
class Release:
    name: str
    file: str
    parent: str | None
    repository: str
    os_distro: str
    os_version: str
    python: str
    cuda: str
    stack_versions: dict[str, str]  # catalog `components`: cudnn -> "8.2.2.26" as NVIDIA's notes state them
    upstream_image: str
    upstream_digest: str | None
    offline: OfflineBase
    cuda_cc: list[str]
    toggles: dict[str, bool]
    nvbuildopts: list[str]
    env: dict[str, str]
    labels: dict[str, str]
    expose: list[int]
    entrypoint: dict[str, str]
    variants: dict[str, Variant]
    resolved: dict[str, Any] = field(repr=False, compare=False)
    # component -> exact pip requirement of NVIDIA's PyPI wheel ("nvidia-cudnn-cu11==8.5.0.96")
    gpu_wheels: dict[str, str] = field(default_factory=dict)
    # what /workspace/docker-examples/Dockerfile.addpackages adds by default: apt, pip
    example_packages: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    # who makes the image (catalog `vendor`; _common.yaml names the project)
    vendor: Vendor = Vendor("tf-image-builder")
    # the components of builder/components/ the release installs: name -> its catalog mapping
    components: dict[str, Any] = field(default_factory=dict)
    # component -> why the release has it not (`NAME: "absent: WHY"`)
    components_absent: dict[str, str] = field(default_factory=dict)

    @property
    def ptxas(self) -> str | None:
        """The CUDA version (MAJOR.MINOR) of the ptxas NVIDIA's nvidia-cuda-nvcc wheel puts
        beside the toolkit's nvcc (gpu_wheels.cuda_nvcc), which assembles capabilities
        newer than nvcc knows (cuda_arch.assembled()); None without that wheel."""
        return ptxas_version(self.gpu_wheels.get("cuda_nvcc"))

    def variant(self, name: str) -> Variant:
        if name not in self.variants:
            raise UserError(
                f"release {self.name} has no variant {printable(name)} (it has: {', '.join(self.variants)})"
            )
        return self.variants[name]

    @property
    def upstream_ref(self) -> str:
        return f"{self.upstream_image}@{self.upstream_digest}" if self.upstream_digest else self.upstream_image

    def spec_text(self, as_json: bool = False) -> str:
        """`builder show`: the release as resolved through its parents, as YAML (or JSON)."""
        spec = dict(self.resolved)
        spec.pop("abstract", None)
        if as_json:
            return json.dumps(spec, indent=2, sort_keys=False) + "\n"
        return yaml.safe_dump(spec, sort_keys=False, width=1 << 16)  # a value stays on one line
