"""What an image really holds, read from inside it: one JSON object on stdout.

Standard library only (plus what the image has): the same file is copied into every
image as /opt/tensorflow/image_report.py. nvbuild.sh runs it to write build-info.json
(the banner reads that), and the builder runs it in a container of a freshly built
image to label it and to check it against the catalog: nothing here repeats what
was requested, everything is probed.

    python3 image_report.py [--no-coverage] [--requested 7.0,8.6]
"""

from __future__ import annotations

import ctypes
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig

if __package__:  # imported from the builder package (host side)
    from builder.in_image.fatbin import coverage_table
    from builder.in_image.libraries import cuda_binaries
else:  # run as a script in the image: fatbin.py and libraries.py sit next to it
    from fatbin import coverage_table  # type: ignore[no-redef]
    from libraries import cuda_binaries  # type: ignore[no-redef]

# The image contract's names this script needs. It runs in the image without the builder
# package, so it cannot import builder/core/contract.py: tests/unit/test_contract.py proves
# these copies (and the report's top-level keys) agree with it.
BUILD_INFO = "/opt/tensorflow/build-info.json"
COMPONENTS = "/opt/tensorflow/components.json"

# Driver user-space libraries: the host's NVIDIA container toolkit injects them; an image
# that carries its own shadows the host driver.
DRIVER_LIBRARIES = (
    "libcuda.so*",
    "libnvidia-ml.so*",
    "libnvidia-ptxjitcompiler.so*",
    "libnvidia-fatbinaryloader.so*",
    "libcudadebugger.so*",
)

# Shared-object names TensorFlow dlopens, by the CUDA major version it was built with.
SONAMES = {
    11: {
        "cudart": "libcudart.so.11.0",
        "cublas": "libcublas.so.11",
        "cublasLt": "libcublasLt.so.11",
        "cufft": "libcufft.so.10",
        "curand": "libcurand.so.10",
        "cusolver": "libcusolver.so.11",
        "cusparse": "libcusparse.so.11",
    },
    12: {
        "cudart": "libcudart.so.12",
        "cublas": "libcublas.so.12",
        "cublasLt": "libcublasLt.so.12",
        "cufft": "libcufft.so.11",
        "curand": "libcurand.so.10",
        "cusolver": "libcusolver.so.11",
        "cusparse": "libcusparse.so.12",
    },
}


def _int_out(lib: ctypes.CDLL, func: str) -> int | None:
    """Call `status func(int *out)` and return out, or None."""
    value = ctypes.c_int(0)
    try:
        status = getattr(lib, func)(ctypes.byref(value))
    except AttributeError:
        return None
    return value.value if status == 0 else None


def _property_version(lib: ctypes.CDLL, func: str) -> str | None:
    """cublasGetProperty-style: MAJOR_VERSION=0, MINOR_VERSION=1, PATCH_LEVEL=2."""
    parts = []
    for prop in (0, 1, 2):
        value = ctypes.c_int(0)
        try:
            if getattr(lib, func)(prop, ctypes.byref(value)) != 0:
                return None
        except AttributeError:
            return None
        parts.append(str(value.value))
    return ".".join(parts)


def _split_version(number: int | None, scheme: str) -> str | None:
    if not number:
        return None
    if scheme == "cuda":  # 11020 -> 11.2
        return f"{number // 1000}.{number % 1000 // 10}"
    if scheme == "nccl":  # 21304 -> 2.13.4 (2.9+: major*10000 + minor*100 + patch)
        return (
            f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
            if number >= 20900
            else f"{number // 1000}.{number % 1000 // 100}.{number % 100}"
        )
    if scheme == "cudnn":  # 8500 -> 8.5.0 (8.x: major*1000 + minor*100 + patch)
        return (
            f"{number // 1000}.{number % 1000 // 100}.{number % 100}"
            if number < 90000
            else f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
        )
    if scheme == "trt":  # 7202 -> 7.2.2 (also cuFFT's and cuRAND's 10401 -> 10.4.1)
        return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"
    return str(number)


def probe_library(name: str, soname: str) -> dict:
    """Load a library the way TensorFlow does (by soname, through the dynamic loader) and
    ask it for its own version."""
    entry: dict = {"soname": soname}
    try:
        lib = ctypes.CDLL(soname)
    except OSError as exc:
        entry.update(loaded=False, error=str(exc).splitlines()[0])
        return entry
    entry["loaded"] = True
    entry["path"] = _loaded_path(soname)
    version = None
    if name == "cudart":
        version = _split_version(_int_out(lib, "cudaRuntimeGetVersion"), "cuda")
    elif name in ("cublas", "cusolver", "cusparse"):
        version = _property_version(
            lib,
            {"cublas": "cublasGetProperty", "cusolver": "cusolverGetProperty", "cusparse": "cusparseGetProperty"}[name],
        )
    elif name == "cublasLt":
        try:
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            n = lib.cublasLtGetVersion()
            version = f"{n // 10000}.{n % 10000 // 100}.{n % 100}" if n >= 10000 else str(n)
        except AttributeError:
            pass
    elif name in ("cufft", "curand"):  # 10401 -> 10.4.1
        version = _split_version(_int_out(lib, "cufftGetVersion" if name == "cufft" else "curandGetVersion"), "trt")
    elif name == "cudnn":
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        version = _split_version(lib.cudnnGetVersion(), "cudnn")
    elif name == "nccl":
        version = _split_version(_int_out(lib, "ncclGetVersion"), "nccl")
    elif name == "tensorrt":
        try:
            version = _split_version(lib.getInferLibVersion(), "trt")
        except AttributeError:
            pass
    if version:
        entry.update(version=version, version_from="the library")
    else:  # e.g. cudart answers only with a driver present: the file's own version suffix
        real = os.path.realpath(entry["path"]) if entry["path"] else ""
        m = re.search(r"\.so\.(\d+(?:\.\d+)+)$", real)
        entry.update(version=m.group(1) if m else None, version_from="the file name" if m else "")
    return entry


def _loaded_path(soname: str) -> str:
    """Where the loader found a library (from /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if os.path.basename(path).startswith(soname.split(".so")[0] + ".so"):
                    return path
    except OSError:
        pass
    return ""


def driver_libraries() -> list[str]:
    """Driver libraries present in the image (link stubs for the linker excepted)."""
    found = []
    roots = ["/usr/lib", "/usr/lib64", "/usr/local", "/lib", "/opt", sysconfig.get_paths()["purelib"]]
    for root in roots:
        for dirpath, _dirnames, filenames in os.walk(root):
            if "/stubs" in dirpath or dirpath.startswith("/proc"):
                continue
            for f in filenames:
                if any(fnmatch.fnmatch(f, pat) for pat in DRIVER_LIBRARIES):
                    found.append(os.path.join(dirpath, f))
    return sorted(set(found))


# --- the framework and its parts --------------------------------------------------------------
def tensorflow_report() -> dict:
    import tensorflow as tf

    info = {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in dict(tf.sysconfig.get_build_info()).items()}
    report = {
        "name": "TensorFlow",
        "version": tf.__version__,
        "git_version": tf.version.GIT_VERSION,
        "compiler": tf.version.COMPILER_VERSION,
        "build_info": info,
        "compile_flags": tf.sysconfig.get_compile_flags(),
        "path": os.path.dirname(tf.__file__),
    }
    try:
        from tensorflow.compiler.tf2tensorrt import _pywrap_py_utils as trt_utils
        from tensorflow.python.compiler.tensorrt import trt_convert  # noqa: F401

        linked = trt_utils.get_linked_tensorrt_version()
        report["tensorrt_linked"] = ".".join(str(x) for x in linked) if any(linked) else ""
    except Exception:  # not a TensorRT build, or an API this version lacks
        report["tensorrt_linked"] = ""
    return report


def filesystems() -> dict:
    """Which URL schemes TensorFlow can open, probed: an unregistered scheme raises
    UnimplementedError; a registered one fails later (no network, no server) or works."""
    import tensorflow as tf

    probes = {"gs": "gs://tfbuilder-probe/x", "hdfs": "hdfs://127.0.0.1:1/x"}
    out = {}
    os.environ.setdefault("GCE_METADATA_HOST", "127.0.0.1:1")
    for scheme, url in probes.items():
        try:
            tf.io.gfile.stat(url)
            out[scheme] = {"available": True, "detail": "opened"}
        except tf.errors.UnimplementedError as exc:
            out[scheme] = {"available": False, "detail": str(exc).splitlines()[0][:200]}
        except Exception as exc:  # registered: fails on the missing server, or on a missing client library
            text = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            missing = any(m in text for m in ("libhdfs", "JAVA_HOME", "HADOOP_HDFS_HOME", "libjvm"))
            out[scheme] = {"available": not missing, "detail": text}
    return out


def xla_report() -> dict:
    """XLA, read off the image: where its GPU compiler finds ptxas and libdevice, searched
    the way it searches (the data directory XLA_FLAGS names, NVIDIA's nvcc wheel beside
    TensorFlow, CUDA's prefix), with ptxas's own version; and a jit_compile run on the CPU
    (XLA compiles and runs there without a GPU) checked against the same sum computed
    without XLA, with the HLO it compiled as the proof that XLA, not TensorFlow, ran it."""
    import tensorflow as tf

    flags = os.environ.get("XLA_FLAGS", "")
    named = re.search(r"--xla_gpu_cuda_data_dir=(\S+)", flags)
    site = os.path.dirname(os.path.dirname(tf.__file__))
    roots = [named.group(1)] if named else []
    roots += [
        os.path.join(site, "nvidia", "cuda_nvcc"),
        os.environ.get("CUDA_HOME") or "/usr/local/cuda",
        "/usr/local/cuda",
    ]
    roots = list(dict.fromkeys(roots))  # each once: CUDA_HOME is usually /usr/local/cuda
    ptxas = next((p for p in (os.path.join(r, "bin", "ptxas") for r in roots) if os.access(p, os.X_OK)), None)
    libdevice = next(
        (p for p in (os.path.join(r, "nvvm", "libdevice", "libdevice.10.bc") for r in roots) if os.path.isfile(p)), None
    )
    out: dict[str, object] = {
        "xla_flags": flags,
        "data_dir_searched": roots,
        "ptxas": ptxas,
        "libdevice": libdevice,
        "ptxas_version": "",
    }
    if ptxas:
        run = subprocess.run([ptxas, "--version"], capture_output=True, text=True)
        found = re.search(r"V(\d+\.\d+\.\d+)", run.stdout)
        out["ptxas_version"] = found.group(1) if found else ""
    try:
        x = tf.constant([[-1.5, 2.0, 3.25], [4.0, -5.0, 0.5]], dtype=tf.float32)

        def plain(v):
            return tf.reduce_sum(tf.nn.relu(v) * 2.0 + 1.0)

        jitted = tf.function(plain, jit_compile=True)
        with tf.device("/CPU:0"):
            got, want = float(jitted(x)), float(plain(x))
            hlo = jitted.experimental_get_compiler_ir(x)(stage="hlo")
        out["cpu_jit_compile"] = {"ok": abs(got - want) < 1e-5 and "HloModule" in hlo, "result": got, "expected": want}
    except Exception as exc:  # no XLA in this build, or it failed: said, not hidden
        out["cpu_jit_compile"] = {"ok": False, "error": (str(exc).splitlines() or [type(exc).__name__])[0][:300]}
    return out


def extension_report() -> dict | None:
    try:
        import tfext
    except ImportError:
        return None
    info = dict(tfext.sysconfig.get_build_info())
    info["library"] = tfext.sysconfig.get_library()
    return info


def components_report(path: str = COMPONENTS) -> dict:
    """The image's components (builder/components/), read as its components.json says: a
    component's own report script (its report() is the entry), the installed versions of
    its distributions, or its probes (each tool's version as the tool states it, its path,
    and the version of the Debian package it came from). No file: an image built before
    components."""
    try:
        with open(path) as f:
            declared = json.load(f)
    except (OSError, ValueError):
        return {}
    out: dict = {}
    for name, entry in declared.items():
        if "script" in entry:
            out[name] = _run_script(str(entry["script"]))
        elif "distributions" in entry:
            out[name] = {str(d): _distribution(str(d)) for d in entry["distributions"]}
        else:  # {"probes": ...}; an image of before scripts lists the probes alone
            out[name] = {tool: _probe_tool(p) for tool, p in entry.get("probes", entry).items()}
    return out


def _distribution(name: str) -> dict:
    from importlib import metadata

    try:
        return {"version": metadata.version(name)}
    except metadata.PackageNotFoundError:
        return {"error": f"{name} is not installed"}


def _run_script(path: str) -> dict | None:
    import importlib.util

    try:
        spec = importlib.util.spec_from_file_location(f"component_report_{abs(hash(path))}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.report()
    except Exception as exc:  # a broken script is the image's problem to report, not a crash
        return {"error": f"{path}: {type(exc).__name__}: {exc}"[:300]}


def _probe_tool(probe: dict) -> dict:
    command = [str(a) for a in probe.get("command") or []]
    exe = shutil.which(command[0]) if command else None
    if exe is None:
        return {"error": f"{command[0] if command else 'no command'} is not on PATH"}
    found: dict = {"path": os.path.realpath(exe)}
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=120)
        m = re.search(str(probe.get("pattern") or "$^"), out.stdout + out.stderr)
        if m:
            found["version"] = m.group(1)
        else:
            last = (out.stdout + out.stderr).strip().splitlines()[-1:] or [""]
            found["error"] = f"exit {out.returncode}: {last[0][:200]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        found["error"] = str(exc)[:200]
    if probe.get("package"):
        try:
            dpkg = subprocess.run(
                ["dpkg-query", "-W", "-f", "${Version}", str(probe["package"])],
                capture_output=True,
                text=True,
                timeout=60,
            )
            found["package_version"] = dpkg.stdout.strip() if dpkg.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            found["package_version"] = ""
    return found


def packages() -> dict[str, str]:
    from importlib import metadata

    out: dict[str, str] = {}
    for dist in metadata.distributions():  # in sys.path order: the first one is what imports
        name = dist.metadata["Name"]
        if name:
            out.setdefault(name.lower().replace("_", "-"), dist.version)
    return dict(sorted(out.items()))


def report(with_coverage: bool = True, requested: list[str] | None = None) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf_report = tensorflow_report()
    build = tf_report["build_info"]
    cuda_major = int(str(build.get("cuda_version") or "0").split(".")[0] or 0)
    libs = {}
    if cuda_major in SONAMES:
        for name, soname in SONAMES[cuda_major].items():
            libs[name] = probe_library(name, soname)
        cudnn = str(build.get("cudnn_version") or "").split(".")[0]
        if cudnn:
            libs["cudnn"] = probe_library("cudnn", f"libcudnn.so.{cudnn}")
        libs["nccl"] = probe_library("nccl", "libnccl.so.2")
        trt = tf_report.get("tensorrt_linked", "").split(".")[0]
        if build.get("is_tensorrt_build"):
            libs["tensorrt"] = probe_library("tensorrt", f"libnvinfer.so.{trt or '7'}")
    ext = extension_report()
    out = {
        "framework_name": "TensorFlow",
        "version": tf_report["version"],
        "tensorflow": tf_report,
        "python": ".".join(str(x) for x in sys.version_info[:3]),
        "cuda_version": str(build.get("cuda_version") or ""),
        "cudnn_version": (libs.get("cudnn") or {}).get("version") or "",
        "nccl_version": (libs.get("nccl") or {}).get("version") or "",
        "tensorrt_version": (libs.get("tensorrt") or {}).get("version") or "",
        "tf_trt_available": bool((libs.get("tensorrt") or {}).get("loaded")),
        "libraries": libs,
        "driver_libraries": driver_libraries(),
        "filesystems": filesystems(),
        "xla": xla_report(),
        "extension": ext,
        "components": components_report(),
        "patches": json.loads(os.environ.get("NVBUILD_PATCHES_JSON") or "[]")
        if ext is None
        else ext.get("patches", []),
        "packages": packages(),
    }
    if with_coverage:
        loaded = {lib["soname"]: lib["path"] for lib in libs.values() if lib.get("loaded") and lib.get("path")}
        binaries = cuda_binaries(loaded)
        out["cuda_binaries"] = binaries
        # Capabilities only ('all' and 'local' are resolved by nvbuild.sh before it calls this).
        wanted = [
            a
            for a in (requested or os.environ.get("TF_CUDA_COMPUTE_CAPABILITIES", "").split(","))
            if re.fullmatch(r"\d+\.\d", a.strip())
        ]
        out["coverage"] = coverage_table(binaries, wanted)
    return out


def main(argv: list[str]) -> int:
    with_coverage = "--no-coverage" not in argv
    requested = None
    if "--requested" in argv:
        requested = [a for a in argv[argv.index("--requested") + 1].split(",") if a]
    print(json.dumps(report(with_coverage, requested), sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
