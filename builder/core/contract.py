"""The image contract, spelled once: what an image built here carries and how it is named.

Everything a built image is read back by lives here, so the writer (render, derive,
templates) and the readers (inspect, readback, derive, the conformance suite) cannot
drift apart:

* `Label`: every label key the project writes or reads;
* `InImage`: paths inside the image (the build tree under /opt/tensorflow, /workspace);
* `BuildInfo`: the keys of build-info.json / the image report (image_report.py's output);
* the image-reference grammar (Docker's), with its one parser `parse_reference`.

Standard library only: builder/in_image/image_report.py runs inside the image and cannot import
this; it keeps copies of the few names it needs, and tests/unit/test_contract.py
proves they agree.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

# ==== label keys =====================================================================
# Spelled out whole (not prefix + suffix) so `grep` for a key finds its one definition.
LABEL_PREFIX = "dev.tfbuilder"


class Label:
    """Label keys. Namespace only (never instantiated); templates see it as `label`."""

    # OCI annotations (github.com/opencontainers/image-spec, annotations.md).
    TITLE = "org.opencontainers.image.title"
    VERSION = "org.opencontainers.image.version"
    DESCRIPTION = "org.opencontainers.image.description"
    VENDOR = "org.opencontainers.image.vendor"  # who built the image: the catalog's vendor.name
    AUTHORS = "org.opencontainers.image.authors"  # the catalog's vendor.maintainer
    CREATED = "org.opencontainers.image.created"
    REVISION = "org.opencontainers.image.revision"
    BASE_NAME = "org.opencontainers.image.base.name"
    # NVIDIA's own, as NGC images carry them.
    BUILD_ID = "com.nvidia.build.id"
    BUILD_REF = "com.nvidia.build.ref"
    CUDA_VERSION = "com.nvidia.cuda.version"
    VOLUMES_NEEDED = "com.nvidia.volumes.needed"

    # What was requested (render.make_context writes these into the Dockerfile).
    RELEASE = "dev.tfbuilder.release"
    VARIANT = "dev.tfbuilder.variant"
    REQUESTED_FRAMEWORK = "dev.tfbuilder.requested-framework"
    CUDA_COMPUTE_CAPABILITIES = "dev.tfbuilder.cuda-compute-capabilities"
    XLA = "dev.tfbuilder.xla"
    GCP = "dev.tfbuilder.gcp"
    HDFS = "dev.tfbuilder.hdfs"
    BASE = "dev.tfbuilder.base"
    ENV_OVERRIDES = "dev.tfbuilder.env-overrides"
    WITHOUT = "dev.tfbuilder.without"  # components left out (--without): "dali,jupyter"
    BASE_IMAGE = "dev.tfbuilder.base-image"
    # The driver contract, computed from the catalog's pinned libraries and the wheel's
    # recorded device code (builder/catalog/driver.py): the oldest driver for machine code (what
    # NVIDIA_REQUIRE_CUDA enforces), and the oldest where kernels are JIT-compiled from PTX.
    MIN_DRIVER = "dev.tfbuilder.min-driver"
    MIN_DRIVER_PTX_JIT = "dev.tfbuilder.min-driver-ptx-jit"
    PTXAS = "dev.tfbuilder.ptxas"  # "12.9": the newer ptxas nvbuild.sh assembles with ("" none)

    # What the image reported (readback.measured_labels, added after the build).
    FRAMEWORK = "dev.tfbuilder.framework"
    FRAMEWORK_VERSION = "dev.tfbuilder.framework-version"
    PYTHON = "dev.tfbuilder.python"
    CUDA = "dev.tfbuilder.cuda"
    CUDNN = "dev.tfbuilder.cudnn"
    NCCL = "dev.tfbuilder.nccl"
    TENSORRT = "dev.tfbuilder.tensorrt"
    TF_TRT = "dev.tfbuilder.tf-trt"
    EXTENSION = "dev.tfbuilder.extension"
    FILESYSTEMS = "dev.tfbuilder.filesystems"
    COVERAGE = "dev.tfbuilder.coverage"

    # A derived image (builder derive).
    PARENT = "dev.tfbuilder.parent"
    PARENT_ID = "dev.tfbuilder.parent-id"
    PATCHES = "dev.tfbuilder.patches"
    APT_PACKAGES = "dev.tfbuilder.apt-packages"
    PIP_PACKAGES = "dev.tfbuilder.pip-packages"
    PIP_ADDED = "dev.tfbuilder.pip-added"  # what --pip resolved to beyond the parent's pins
    NVBUILD_ARGS = "dev.tfbuilder.nvbuild-args"

    # A runtime image (builder build --runtime): the devel image it was copied from.
    RUNTIME_OF = "dev.tfbuilder.runtime-of"

    # The offline CUDA base (builder base).
    BASE_DEBIAN = "dev.tfbuilder.base.debian"
    BASE_RECIPE = "dev.tfbuilder.base.recipe"


def label_keys() -> dict[str, str]:
    """Every label key by its constant's name (tests check them against the grammar)."""
    return {name: value for name, value in vars(Label).items() if name.isupper()}


# ==== paths inside the image =========================================================
class InImage:
    """Where things are inside an image. Namespace only; templates see it as `image`."""

    HOME = "/opt/tensorflow"  # nvbuild.sh's directory and WORKDIR
    NVBUILD = "/opt/tensorflow/nvbuild.sh"
    NVBUILDOPTS = "/opt/tensorflow/nvbuildopts"
    CUDA_ARCH = "/opt/tensorflow/cuda_arch.py"
    IMAGE_REPORT = "/opt/tensorflow/image_report.py"
    # The devel image's components (builder/components/) and how the report reads their versions
    COMPONENTS = "/opt/tensorflow/components.json"
    BUILD_INFO = "/opt/tensorflow/build-info.json"  # written by nvbuild.sh, read by the banner
    LOCKS = "/opt/tensorflow/locks"
    # Every installed Python package pinned (pip-constraints); PIP_CONSTRAINT points here.
    PIP_CONSTRAINT = "/etc/pip/constraint.txt"
    SOURCE = "/opt/tensorflow/tensorflow-source"  # the framework source nvbuild.sh builds
    PATCHES = "/opt/tensorflow/patches"
    # The marker of the project's extension in SOURCE (a TensorFlow checkout lacks it).
    EXTENSION_MARKER = "/opt/tensorflow/tensorflow-source/python/tfext/__init__.py"
    ENTRYPOINT = "/opt/nvidia/nvidia_entrypoint.sh"
    # The CUDA driver's JIT cache (CUDA_CACHE_PATH): kernels compiled from PTX on a GPU the
    # image has no machine code for. World-writable (sticky), so any user can fill it;
    # a volume there keeps it across containers (README, "Running on a GPU").
    JIT_CACHE = "/var/cache/cuda-jit"
    WORKSPACE = "/workspace"
    NVIDIA_EXAMPLES = "/workspace/nvidia-examples"
    DOCKER_EXAMPLES = "/workspace/docker-examples"

    # Files copied next to nvbuild.sh: the build contract of every image.
    # builder/in_image/, copied next to nvbuild.sh: the policy, the CUDA binaries' reader, the report
    IN_IMAGE_MODULES = ("cuda_arch.py", "fatbin.py", "libraries.py", "image_report.py")
    BUILD_FILES = ("nvbuild.sh", "nvbuildopts", *IN_IMAGE_MODULES)


class ImageEnv:
    """Environment variables of the runtime contract the image sets (render.make_context),
    besides the release's own defaults. Namespace only."""

    # libnvidia-container's start-up check: comma-separated constraints are ANDed,
    # space-separated ones ORed ("cuda>=12.0,driver>=525.60.13").
    REQUIRE_CUDA = "NVIDIA_REQUIRE_CUDA"
    CACHE_PATH = "CUDA_CACHE_PATH"
    CACHE_MAXSIZE = "CUDA_CACHE_MAXSIZE"


# The JIT cache's size: the CUDA driver's maximum, 4 GiB (its default is 256 MiB, 1 GiB for
# desktop and server GPUs in recent drivers: CUDA Programming Guide, "CUDA Environment
# Variables"). TensorFlow's kernels compiled from PTX for one GPU do not fit the default.
JIT_CACHE_MAXSIZE = 4 * 1024**3


# Corporate build settings as BuildKit secrets: id `builder-<name>`, mounted for one RUN at
# SETTINGS_DIR/<name>, where with-build-settings reads them. Without the secret (no
# settings, or a plain `docker build`) nothing is mounted and the command runs as it is.
# The legacy builder cannot mount: engine.py strips these mounts (BUILDER_MOUNT) and the
# builder serves the same files over loopback (BUILD_SETTINGS) instead.
SETTINGS_DIR = "/run/builder-settings"
SETTINGS_SECRETS = ("apt-mirror", "pip-index", "ca.crt")
# nvbuild.sh's compile cache on this machine: a BuildKit cache mount it uses only when
# it is a mount point (nvbuild.sh --help, "Local compile cache").
COMPILE_CACHE_DIR = "/var/cache/nvbuild"
COMPILE_CACHE_ID = "tfbuilder-nvbuild-ccache"


def settings_secret_id(name: str) -> str:
    return f"builder-{name}"


def settings_mount_flags() -> list[str]:
    return [
        f"--mount=type=secret,id={settings_secret_id(n)},target={SETTINGS_DIR}/{n},required=false"
        for n in SETTINGS_SECRETS
    ]


def settings_mounts() -> str:
    """The RUN flags that mount the settings (templates: `RUN {{ settings_mounts() }} \\`)."""
    return " ".join(settings_mount_flags())


def compile_cache_mount() -> str:
    """The RUN flag that mounts nvbuild.sh's local compile cache."""
    return f"--mount=type=cache,id={COMPILE_CACHE_ID},target={COMPILE_CACHE_DIR}"


# Exactly the builder's own mounts, as the functions above write them (the legacy builder
# gets the Dockerfile without them).
BUILDER_MOUNT = re.compile(
    "|".join(re.escape(flag) + r"[ \t]*" for flag in [*settings_mount_flags(), compile_cache_mount()])
)


def lock_file(python: str) -> str:
    """The lock of one Python inside the image (`3.8` -> .../requirements-py3.8.txt)."""
    return f"{InImage.LOCKS}/requirements-py{python}.txt"


# ==== build-info.json / the image report =============================================
class BuildInfo:
    """Top-level keys of image_report.py's JSON, which nvbuild.sh also writes as
    build-info.json. A report with coverage adds COVERAGE_KEYS."""

    FRAMEWORK_NAME = "framework_name"
    VERSION = "version"
    KEYS = (
        "framework_name",
        "version",
        "tensorflow",
        "python",
        "cuda_version",
        "cudnn_version",
        "nccl_version",
        "tensorrt_version",
        "tf_trt_available",
        "libraries",
        "driver_libraries",
        "filesystems",
        "xla",
        "extension",
        "components",
        "patches",
        "packages",
    )
    COVERAGE_KEYS = ("cuda_binaries", "coverage")
    # The part every build-info.json has, also the one nvbuild.sh writes without the
    # report script (a bare tree in the unit tests): what the banner reads.
    BANNER_KEYS = ("framework_name", "version")


def build_info_problems(info: Any, full: bool = True) -> list[str]:
    """What is wrong with a build-info/report object ([] when nothing is). `full=False`
    checks only what the banner reads."""
    if not isinstance(info, dict):
        return [f"is a {type(info).__name__}, not an object"]
    problems = [
        f"{key!r} is not a non-empty string"
        for key in BuildInfo.BANNER_KEYS
        if not isinstance(info.get(key), str) or not info[key]
    ]
    if full:
        problems += [f"{key!r} is missing" for key in BuildInfo.KEYS if key not in info]
    return problems


# ==== image references (github.com/distribution/reference, regexp.go) ================
# All patterns are used with fullmatch (see grammar.py for why nothing is anchored).
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[[a-fA-F0-9:]+\]"
DOMAIN = rf"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
REMOTE_NAME = rf"{PATH_COMPONENT}(?:/{PATH_COMPONENT})*"
NAME = rf"(?:{DOMAIN}/)?{REMOTE_NAME}"
TAG_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
DIGEST_PATTERN = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
REFERENCE_PATTERN = rf"({NAME})(?::({TAG_PATTERN}))?(?:@({DIGEST_PATTERN}))?"
NAME_TOTAL_LENGTH_MAX = 255  # distribution/reference: NameTotalLengthMax
DEFAULT_TAG = "latest"

REPOSITORY = re.compile(NAME)
# The port of HOST[:PORT] ([IPV6] ends in "]"): Docker's grammar takes any digits, a socket
# 1 to 65535 (a larger number would be taken modulo 65536 by some clients: 99999 is 34463).
PORT = re.compile(r":([0-9]+)\Z")
MAX_PORT = 65535
# Where `builder push --registry` sends images: HOST[:PORT][/NAMESPACE].
REGISTRY = re.compile(rf"{DOMAIN}(?:/{REMOTE_NAME})?")
TAG = re.compile(TAG_PATTERN)
DIGEST = re.compile(DIGEST_PATTERN)
SHA256_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
REFERENCE = re.compile(REFERENCE_PATTERN)
# An image id as the engine prints it, full or short (what `docker images -q` shows).
IMAGE_ID = re.compile(r"(?:sha256:)?[0-9a-f]{12,64}")


class Reference(NamedTuple):
    """An image reference taken apart: registry is None for Docker Hub's default."""

    registry: str | None
    repository: str  # the path after the registry (or the whole name without one)
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        """The repository name as the engine takes it: [REGISTRY/]PATH."""
        return f"{self.registry}/{self.repository}" if self.registry else self.repository


def split_domain(name: str) -> tuple[str | None, str]:
    """(domain, rest) the way Docker splits a repository name: the first component is a
    registry host when it holds '.' or ':', is 'localhost', or has upper-case letters."""
    first, sep, rest = name.partition("/")
    if sep and (any(c in first for c in ".:") or first == "localhost" or first.lower() != first):
        return first, rest
    return None, name


def parse_reference(ref: str) -> Reference:
    """NAME[:TAG][@DIGEST] taken apart; ValueError (with reference_problem's reason) when
    REF is not a valid reference."""
    why = reference_problem(ref)
    if why:
        raise ValueError(f"{ref!r} {why}")
    m = REFERENCE.fullmatch(ref)
    assert m is not None  # reference_problem accepted it
    registry, repository = split_domain(m.group(1))
    return Reference(registry, repository, m.group(2), m.group(3))


def split_ref(ref: str) -> tuple[str, str]:
    """(name, tag) as the engine API takes them: 'host:5000/a/b:tag' -> ('host:5000/a/b',
    'tag'); no tag means 'latest'; a digest stays with the name. Lenient on purpose (no
    validation): callers pass references that were checked, or image ids."""
    name, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, DEFAULT_TAG
    return name, tag


def port_problem(host: str) -> str | None:
    """Why the port of HOST[:PORT] cannot be connected to (not 1 to 65535), or None (also
    when HOST is not a host at all: the grammar's checks say that)."""
    m = PORT.search(host)
    port = m.group(1) if m else None
    if port is not None and (len(port) > 5 or not 1 <= int(port) <= MAX_PORT):
        return f"has port {port[:12]}: a port is 1 to {MAX_PORT}"
    return None


def registry_problem(registry: str) -> str | None:
    """Why REGISTRY is not HOST[:PORT][/NAMESPACE] (`--registry`), or None."""
    if not isinstance(registry, str) or len(registry) > NAME_TOTAL_LENGTH_MAX or not REGISTRY.fullmatch(registry):
        return "is not HOST[:PORT][/NAMESPACE]"
    return port_problem(registry.split("/", 1)[0])


def repository_problem(name: str) -> str | None:
    """Why NAME is not an image repository name (Docker's grammar, its port 1 to 65535), or None."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if len(name) > NAME_TOTAL_LENGTH_MAX:
        return f"is longer than {NAME_TOTAL_LENGTH_MAX} characters"
    if REPOSITORY.fullmatch(name):
        domain = split_domain(name)[0]
        return port_problem(domain) if domain else None
    domain, rest = split_domain(name)
    lowered = f"{domain}/{rest.lower()}" if domain is not None else rest.lower()
    if lowered != name and REPOSITORY.fullmatch(lowered):
        return "has upper-case letters: repository names are lowercase"
    return (
        "is not a repository name (lower-case letters and digits, '.', '_' or '-' "
        "between them, '/' between components, optionally HOST[:PORT]/ first)"
    )


def tag_problem(tag: str) -> str | None:
    """Why TAG is not an image tag, or None."""
    if not isinstance(tag, str) or not tag:
        return "is empty"
    if len(tag) > 128:
        return "is longer than 128 characters"
    if not TAG.fullmatch(tag):
        return "is not a valid image tag (letters, digits, '_', '.' and '-', not starting with '.' or '-')"
    return None


def tag_reference_problem(ref: str) -> str | None:
    """Why REF cannot be a tag given to an image (`-t`): reference_problem's reasons, or a
    digest (the engine tags NAME[:TAG]; a digest names what a registry already holds)."""
    why = reference_problem(ref)
    if why is None and "@" in ref:
        return "has a digest: an image is tagged NAME[:TAG] (a digest names an image a registry holds)"
    return why


def reference_problem(ref: str) -> str | None:
    """Why REF is not an image reference NAME[:TAG][@DIGEST], or None."""
    if not isinstance(ref, str) or not ref:
        return "is empty"
    m = REFERENCE.fullmatch(ref)
    if m is not None:
        return repository_problem(m.group(1))
    name = ref.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
        why = tag_problem(tag)
        if why:
            return f"has an invalid tag: it {why}"
    return repository_problem(name) or "is not an image reference NAME[:TAG][@DIGEST]"
