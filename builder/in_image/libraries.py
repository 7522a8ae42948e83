"""Where an image's CUDA binaries are: the directories the dynamic loader searches and the
Python tree, which component each shared object belongs to, and which copy of a library the
loader takes when there are several. fatbin.py reads each one's device code.

Runs inside images next to image_report.py, which imports it (standard library only, like
fatbin.py and cuda_arch.py); the builder imports it from its package.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the report's shape, for the checker (not copied into images)
    from builder.in_image.report_types import Binary

if __package__:  # imported from the builder package (host side)
    from builder.in_image.fatbin import device_code
else:  # run in the image: fatbin.py sits next to it
    from fatbin import device_code  # type: ignore[no-redef]


def _ld_so_conf_dirs(conf: str = "/etc/ld.so.conf", seen: set | None = None) -> list[str]:
    """The directories ld.so.conf names, its `include` globs followed."""
    import glob

    seen = set() if seen is None else seen
    conf = os.path.realpath(conf)
    if conf in seen:
        return []
    seen.add(conf)
    dirs: list[str] = []
    try:
        with open(conf) as f:
            lines = f.read().splitlines()
    except OSError:
        return dirs
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line.startswith("include"):
            pattern = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
            pattern = pattern if pattern.startswith("/") else os.path.join(os.path.dirname(conf), pattern)
            for included in sorted(glob.glob(pattern)):
                dirs += _ld_so_conf_dirs(included, seen)
        elif line.startswith("/"):
            dirs.append(line)
    return dirs


def search_roots() -> tuple[list[str], list[str]]:
    """(trees walked whole, directories read flat): the Python tree's site directories and
    the CUDA toolkits; the loader's directories in its order (LD_LIBRARY_PATH, ld.so.conf,
    the system's)."""
    import glob
    import site

    trees = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    try:
        trees += site.getsitepackages()
    except AttributeError:  # a virtualenv's old site.py
        pass
    trees += [p for p in sys.path if os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")]
    trees += [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    trees += sorted(glob.glob("/usr/local/cuda*"))
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    flat = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p] + _ld_so_conf_dirs()
    flat += [d for base in ("/lib", "/usr/lib") for d in ((f"{base}/{multiarch}",) if multiarch else ()) + (base,)]
    flat += ["/lib64", "/usr/lib64"]
    return _directories(trees), _directories(flat)


def _directories(paths: list[str]) -> list[str]:
    """PATHS that are directories, each once, in order."""
    return [p for p in dict.fromkeys(os.path.normpath(p) for p in paths) if os.path.isdir(p)]


def _shared_objects(trees: list[str], flat: list[str]) -> dict[str, str]:
    """{real path: the root it was found under} of every regular file named like a shared
    object ('.so' in its name) in TREES (walked) and FLAT (the directory only), link stubs
    (/stubs/) left out."""
    found: dict[str, str] = {}

    def add(directory: str, names: list[str], root: str) -> None:
        for name in names:
            if ".so" in name:
                real = os.path.realpath(os.path.join(directory, name))
                if real not in found and "/stubs/" not in real and os.path.isfile(real):
                    found[real] = root

    for root in trees:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in ("stubs", "__pycache__")]
            add(dirpath, filenames, root)
    for directory in flat:
        try:
            add(directory, os.listdir(directory), directory)
        except OSError:
            pass
    return found


# Which component a binary belongs to: first by the Python package it sits in (a package's
# bundled libraries are its own: DALI's nvCOMP and CV-CUDA count as DALI), then by its
# library name (an NVIDIA wheel's copy and the CUDA toolkit's alike), else its package or
# library stem. describe/readback group the coverage by these ids, in this order.
PACKAGE_COMPONENTS = (
    (r"tensorflow(?:_core)?/", "tensorflow"),
    (r"tfext/", "extension"),
    (r"horovod/", "horovod"),
    (r"nvidia/dali(?:_tf_plugin)?/", "dali"),
)
LIBRARY_COMPONENTS = (
    ("cudnn", r"libcudnn"),
    ("cublas", r"libcublas|libnvblas"),
    ("cufft", r"libcufft"),
    ("cusparselt", r"libcusparseLt"),
    ("cusparse", r"libcusparse"),
    ("cusolver", r"libcusolver"),
    ("curand", r"libcurand"),
    ("nccl", r"libnccl"),
    ("nvjitlink", r"libnvJitLink"),
    ("nvrtc", r"libnvrtc"),
    ("cudart", r"libcudart"),
    ("cupti", r"libcupti|libnvperf|libaccinj|libpcsamplingutil|libcheckpoint"),
    ("npp", r"libnpp"),
    ("nvjpeg", r"libnvjpeg"),
    ("cutensor", r"libcutensor"),
    ("cufile", r"libcufile"),
    ("tensorrt", r"libnvinfer|libnvonnxparser|libnvparsers"),
)
COMPONENT_NAMES = {
    "tensorflow": "TensorFlow",
    "extension": "tfext",
    "horovod": "Horovod",
    "dali": "DALI",
    "cudnn": "cuDNN",
    "cublas": "cuBLAS",
    "cufft": "cuFFT",
    "cusparselt": "cuSPARSELt",
    "cusparse": "cuSPARSE",
    "cusolver": "cuSOLVER",
    "curand": "cuRAND",
    "nccl": "NCCL",
    "nvjitlink": "nvJitLink",
    "nvrtc": "NVRTC",
    "cudart": "the CUDA runtime",
    "cupti": "CUPTI",
    "npp": "NPP",
    "nvjpeg": "nvJPEG",
    "cutensor": "cuTENSOR",
    "cufile": "cuFile",
    "tensorrt": "TensorRT",
}


def component_of(path: str, root: str, trees: list[str]) -> str:
    """The component of the binary at PATH, found under ROOT (one of TREES, the Python tree's
    roots, or a library directory)."""
    name = os.path.basename(path)
    rel = os.path.relpath(path, root).replace(os.sep, "/") if root in trees else ""
    for pattern, component in PACKAGE_COMPONENTS:
        if re.match(pattern, rel):
            return component
    for component, pattern in LIBRARY_COMPONENTS:
        if re.match(pattern, name):
            return component
    if rel and "/" in rel:
        parts = rel.split("/")
        return f"{parts[0]}-{parts[1]}" if parts[0] == "nvidia" and len(parts) > 2 else parts[0]
    return re.split(r"\.so", name, maxsplit=1)[0]


def _loader_cache() -> dict[str, str]:
    """{soname: path} the dynamic loader's cache resolves (ldconfig -p, first entry wins)."""
    tool = shutil.which("ldconfig", path=os.pathsep.join([os.environ.get("PATH", ""), "/sbin", "/usr/sbin"]))
    if not tool:
        return {}
    try:
        listing = subprocess.run([tool, "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    cache: dict[str, str] = {}
    for line in listing.splitlines():
        m = re.match(r"\s+(\S+) \([^)]*\) => (\S+)$", line)
        if m:
            cache.setdefault(m.group(1), m.group(2))
    return cache


def resolve_soname(soname: str, loaded: dict[str, str], cache: dict[str, str]) -> str:
    """The file the loader gives for SONAME: what this process loaded, else the first
    LD_LIBRARY_PATH directory holding it, else the loader's cache ('' when none)."""
    if loaded.get(soname):
        return os.path.realpath(loaded[soname])
    for directory in [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]:
        if os.path.isfile(os.path.join(directory, soname)):
            return os.path.realpath(os.path.join(directory, soname))
    return os.path.realpath(cache[soname]) if soname in cache else ""


def mark_shadowed(binaries: list[Binary], loaded: dict[str, str], cache: dict[str, str] | None = None) -> None:
    """Copies of one library (the same soname in two places: a wheel's and the CUDA
    toolkit's) are not all loaded: the loader takes one. The others get "shadowed_by" (the
    one it takes) and count for no component's coverage."""
    by_soname: dict[str, list[Binary]] = {}
    for b in binaries:
        if b.get("soname"):
            by_soname.setdefault(b["soname"], []).append(b)
    for soname, copies in by_soname.items():
        if len(copies) < 2:
            continue
        cache = _loader_cache() if cache is None else cache
        winner = resolve_soname(soname, loaded, cache)
        if winner and any(b["path"] == winner for b in copies):
            for b in copies:
                if b["path"] != winner:
                    b["shadowed_by"] = winner


def cuda_binaries(loaded: dict[str, str]) -> list[Binary]:
    """Every shared object with device code under the Python tree and the library path, with
    its component; LOADED ({soname: path}, what the probes loaded) says which copy of a
    library the loader takes."""
    from concurrent.futures import ThreadPoolExecutor

    trees, flat = search_roots()
    files = _shared_objects(trees, flat)
    # pread releases the GIL: reads of files not yet in the page cache overlap
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = [b for b in pool.map(device_code, sorted(files)) if b is not None]
    for b in found:
        b["component"] = component_of(b["path"], files[b["path"]], trees)
    mark_shadowed(found, loaded)
    return found
