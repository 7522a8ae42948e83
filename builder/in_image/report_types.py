"""The image report's shape, declared once: what image_report.py prints (and nvbuild.sh
stores as build-info.json) and what the builder's readers index. A report is JSON, so these
are TypedDicts: no runtime cost, and a checker holds every reader's keys to them.

Standard library only, like the rest of in_image/; image_report.py and fatbin.py name these
types for the checker alone (they are not copied into images). tests/unit/test_contract.py
holds the top-level keys to contract.BuildInfo and to what image_report.report() writes.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict


class Library(TypedDict, total=False):
    """A CUDA library loaded by soname the way TensorFlow loads it."""

    soname: str
    loaded: bool
    path: str
    version: Optional[str]
    version_from: str
    error: str


class Tensorflow(TypedDict, total=False):
    name: str
    version: str
    git_version: str
    compiler: str
    build_info: Dict[str, Any]
    compile_flags: List[str]
    path: str
    tensorrt_linked: str


class Filesystem(TypedDict):
    available: bool
    detail: str


class Binary(TypedDict, total=False):
    """One shared object with device code: its architectures as digit strings."""

    path: str
    soname: str
    component: str
    sass: List[str]
    ptx: List[str]
    modules: int
    ptx_modules: Dict[str, int]
    no_kernels: bool
    kernels_elsewhere: bool
    shadowed_by: str
    error: str


# How one binary serves one GPU: kind is sass, ptx or none, "from" the architecture it
# comes from; modules: [JIT-able, all] when only some of its modules carry PTX.
CoverageCell = TypedDict(
    "CoverageCell", {"component": str, "kind": str, "from": str, "modules": List[int]}, total=False
)


# capability -> binary path -> its cell
Coverage = Dict[str, Dict[str, CoverageCell]]


class Tool(TypedDict, total=False):
    """One tool of a component (builder/components/): what it says it is, where, from which package."""

    version: str
    path: str
    package_version: str
    error: str


class ImageReport(TypedDict, total=False):
    """image_report.py's JSON. contract.BuildInfo.KEYS are always there; COVERAGE_KEYS with
    coverage; coverage_note is added by readers that explain a missing table."""

    framework_name: str
    version: str
    tensorflow: Tensorflow
    python: str
    cuda_version: str
    cudnn_version: str
    nccl_version: str
    tensorrt_version: str
    tf_trt_available: bool
    libraries: Dict[str, Library]
    driver_libraries: List[str]
    filesystems: Dict[str, Filesystem]
    xla: Dict[str, Any]
    extension: Optional[Dict[str, Any]]
    # component -> its entry: tool -> Tool (probes), or what its report script returns
    components: Dict[str, Any]
    patches: List[Any]
    packages: Dict[str, str]
    cuda_binaries: List[Binary]
    coverage: Coverage
    coverage_note: str
