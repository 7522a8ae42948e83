"""Metadata read back from a built image, never copied from the request.

`read_report` runs /opt/tensorflow/image_report.py in a container of the image (I/O);
everything else is pure: `check` compares the report with the catalog (problems fail
the build and move no tag; warnings are printed), `measured_labels` turns it into the
labels the builder adds to the image, `coverage_rows` into the GPU coverage table.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from builder import cuda_arch, paths
from builder.catalog import Release, Variant, canonical_name
from builder.errors import UserError
from builder.contract import InImage, Label

REPORT_SCRIPT = InImage.IMAGE_REPORT
# Libraries every GPU image must load (the driver excepted); TensorRT is optional.
REQUIRED_LIBRARIES = ("cudart", "cublas", "cublasLt", "cufft", "curand", "cusolver", "cusparse", "cudnn")
KIND_TEXT = {"sass": "SASS", "ptx": "PTX JIT", "none": "none"}


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def content_key(inspect: dict, command: list[str]) -> str:
    """What a report depends on: the image's layers (content-addressed), its runtime config
    and the report command; not its labels, name or creation time. Two images with the same
    key hold the same files and run the report the same way."""
    config = inspect.get("Config") or {}
    parts = {"layers": (inspect.get("RootFS") or {}).get("Layers"), "env": config.get("Env"),
             "user": config.get("User"), "workdir": config.get("WorkingDir"), "command": command}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def read_report(engine, image: str, requested: list[str] | None = None, coverage: bool = True,
                store: Path | None = None) -> dict:
    """Run the image's own report in a throwaway container; a UserError when it cannot.
    With `store`, a report is kept under its content key and reused for an image with the
    same layers and config (a no-op rebuild differs only in its date label)."""
    cmd = ["python3", REPORT_SCRIPT]
    if not coverage:
        cmd.append("--no-coverage")
    if requested:
        cmd += ["--requested", ",".join(requested)]
    kept = store / f"{content_key(engine.inspect(image), cmd)}.json" if store else None
    return paths.kept_json(kept, lambda: _run_report(engine, image, cmd))


def _run_report(engine, image: str, cmd: list[str]) -> dict:
    code, out = engine.run_capture(image, cmd, stdout_only=True, timeout=600)
    if code != 0:
        _, err = engine.run_capture(image, cmd, timeout=600)
        tail = (err.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{image}: the image could not report what it holds ({REPORT_SCRIPT} exited {code}: {tail})")
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise UserError(f"{image}: {REPORT_SCRIPT} printed no JSON report") from None


def _short(path: str) -> str:
    return os.path.basename(path)


def _by_capability(coverage: dict) -> list:
    """The coverage table's rows in capability order (the report's JSON sorts its keys as
    text: "10.0" before "6.0")."""
    return sorted(coverage.items(), key=lambda kv: cuda_arch.order(kv[0]))


def coverage_summary(report: dict) -> dict[str, str]:
    """Per requested capability, the weakest way any binary runs on it:
    {"8.6": "sass", "9.0": "ptx (tensorflow)", ...}."""
    out = {}
    for arch, row in _by_capability(report.get("coverage") or {}):
        kinds = {cell["kind"] for cell in row.values()}
        worst = "none" if "none" in kinds else "ptx" if "ptx" in kinds else "sass"
        who = sorted({cell["component"] for cell in row.values() if cell["kind"] == worst})
        out[arch] = worst if worst == "sass" else f"{worst} ({', '.join(who)})"
    return out


def coverage_rows(report: dict) -> tuple[list[str], list[list[str]]]:
    """The coverage table: a header and one row per capability, one column per binary."""
    binaries = report.get("cuda_binaries") or []
    header = ["capability"] + [f"{b['component']}:{_short(b['path'])}" for b in binaries]
    rows = []
    for arch, row in _by_capability(report.get("coverage") or {}):
        cells = [arch]
        for b in binaries:
            cell = row.get(b["path"], {"kind": "none", "from": ""})
            cells.append(f"{KIND_TEXT[cell['kind']]} {cell['from']}".strip())
        rows.append(cells)
    return header, rows


def check(report: dict, release: Release, variant: Variant, requested: list[str], toggles: dict[str, bool],
          expect_extension: bool = True) -> Verdict:
    """Compare what the image holds with what the catalog and the request say."""
    v = Verdict()
    if report.get("version") != variant.framework_version:
        v.problems.append(f"the image holds {report.get('framework_name')} {report.get('version')}, "
                          f"the catalog says {variant.framework_version}")
    libs = report.get("libraries") or {}
    if report.get("tensorflow", {}).get("build_info", {}).get("is_cuda_build"):
        for name in REQUIRED_LIBRARIES + (("nccl",) if "nccl" in release.gpu_wheels else ()):
            lib = libs.get(name)
            if not lib or not lib.get("loaded"):
                why = (lib or {}).get("error", "not probed")
                v.problems.append(f"GPU library {name} ({(lib or {}).get('soname', '?')}) does not load: {why}")
        trt = libs.get("tensorrt")
        if trt is not None and not trt.get("loaded"):
            v.warnings.append(f"TF-TRT is unavailable: {report['framework_name']} {report['version']} was built against "
                              f"TensorRT {report['tensorflow'].get('tensorrt_linked') or '?'} and {trt.get('soname')} "
                              "is not in the image (no such wheel on PyPI)")
    for path in report.get("driver_libraries") or []:
        v.problems.append(f"driver library {path} is in the image (the host's NVIDIA container toolkit provides it)")
    ext = report.get("extension")
    if expect_extension:
        if not ext:
            v.problems.append("the extension (tfext) is not installed")
        else:
            want = [f"sm_{a.replace('.', '')}" for a in requested]
            if want and ext.get("cuda_compute_capabilities", [])[:len(want)] != want:
                v.problems.append(f"the extension was compiled for {ext.get('cuda_compute_capabilities')}, "
                                  f"requested {','.join(requested)}")
            if bool(ext.get("is_xla_build")) != bool(toggles.get("xla")):
                v.problems.append(f"the extension's XLA kernels are {'in' if ext.get('is_xla_build') else 'not in'} "
                                  f"the build, but TF_ENABLE_XLA={int(bool(toggles.get('xla')))}")
    hvd = report.get("horovod")
    if release.horovod:
        if not hvd:
            v.problems.append(f"Horovod {release.horovod.version} is not installed")
        elif hvd.get("version") != release.horovod.version:
            v.problems.append(f"the image holds Horovod {hvd.get('version')}, the catalog says {release.horovod.version}")
    for arch, row in (report.get("coverage") or {}).items():
        for path, cell in row.items():
            if cell["kind"] == "none":
                v.problems.append(f"compute capability {arch}: {cell['component']} binary {_short(path)} "
                                  "carries no code a GPU of it can run (no SASS, no older PTX)")
            elif cell["kind"] == "ptx" and cell["component"] != "tensorflow":
                v.warnings.append(f"compute capability {arch}: {_short(path)} runs by PTX JIT from {cell['from']}")
    ptx_tf = sorted({(a, c["from"]) for a, row in (report.get("coverage") or {}).items()
                     for c in row.values() if c["kind"] == "ptx" and c["component"] == "tensorflow"})
    for arch, source in ptx_tf:
        v.warnings.append(f"compute capability {arch}: TensorFlow's own kernels run by PTX JIT from {source} "
                          "(the first launch on such a GPU compiles them)")
    v.problems += xla_problems(report, toggles)
    fs = report.get("filesystems") or {}
    if not toggles.get("gcp") and (fs.get("gs") or {}).get("available"):
        v.warnings.append(f"TF_NEED_GCP=0, but the {report.get('framework_name')} {report.get('version')} wheel "
                          "has gs:// built in: it stays available")
    return v


def xla_problems(report: dict, toggles: dict[str, bool]) -> list[str]:
    """With XLA on: its GPU compiler must find ptxas and libdevice where it looks, and a
    jit_compile run on the CPU must give the right answer (reports made before the image
    reported XLA say nothing of it)."""
    xla = report.get("xla")
    if not toggles.get("xla") or xla is None:
        return []
    out = []
    if report.get("tensorflow", {}).get("build_info", {}).get("is_cuda_build"):
        missing = [what for what, key in (("ptxas", "ptxas"), ("libdevice.10.bc", "libdevice")) if not xla.get(key)]
        if missing:
            out.append(f"TF_ENABLE_XLA=1, but XLA's GPU compiler finds no {' and no '.join(missing)} where it looks "
                       f"({', '.join(xla.get('data_dir_searched') or [])}; XLA_FLAGS=--xla_gpu_cuda_data_dir=DIR names another)")
    jit = xla.get("cpu_jit_compile") or {}
    if not jit.get("ok"):
        out.append(f"TF_ENABLE_XLA=1, but a jit_compile run on the CPU failed: "
                   f"{jit.get('error') or 'got %s, expected %s' % (jit.get('result'), jit.get('expected'))}")
    return out


def measured_labels(report: dict) -> dict[str, str]:
    """Labels describing what the image holds, from its own report."""
    ext = report.get("extension") or {}
    hvd = report.get("horovod") or {}
    fs = report.get("filesystems") or {}
    cov = coverage_summary(report)
    parts = [f"{report.get('framework_name')} {report.get('version')} (upstream wheel)"
             if ext else f"{report.get('framework_name')} {report.get('version')}"]
    if report.get("cuda_version"):
        parts.append(f"CUDA {report['cuda_version']}, cuDNN {report.get('cudnn_version') or 'none'}, "
                     f"NCCL {report.get('nccl_version') or 'none'}")
    built = [x for x in (f"{ext.get('framework_name')} {ext.get('version')}" if ext else "",
                         f"Horovod {hvd.get('version')}" if hvd else "") if x]
    caps = ",".join(cov)
    if built:
        parts.append(f"{' and '.join(built)} compiled for {caps}" if caps else " and ".join(built))
    hvd_ops = [n[:-6] for n in ("mpi_built", "gloo_built", "nccl_built", "cuda_built") if hvd.get(n) is True]
    return {
        Label.DESCRIPTION: "; ".join(parts),
        Label.FRAMEWORK: str(report.get("framework_name", "")),
        Label.FRAMEWORK_VERSION: str(report.get("version", "")),
        Label.PYTHON: str(report.get("python", "")),
        Label.CUDA: str(report.get("cuda_version", "")),
        Label.CUDNN: str(report.get("cudnn_version", "")),
        Label.NCCL: str(report.get("nccl_version", "")),
        Label.TENSORRT: str(report.get("tensorrt_version", "")),
        Label.TF_TRT: "available" if report.get("tf_trt_available") else "unavailable",
        Label.EXTENSION: f"{ext.get('framework_name')} {ext.get('version')}" if ext else "",
        Label.HOROVOD: (f"{hvd.get('version')} ({', '.join(hvd_ops)})" if hvd else ""),
        Label.FILESYSTEMS: ",".join(sorted(k for k, x in fs.items() if x.get("available"))),
        Label.COVERAGE: " ".join(f"{a}={k.replace(' ', '')}" for a, k in cov.items()),
        Label.TOOLS: " ".join(f"{n}={v}" for n, v in tool_versions(report).items()),
        Label.DALI: dali_label(report.get("dali")),
    }


# The distributions of the tools a catalog may install (catalog `tools`), as the label names them.
TOOL_DISTRIBUTIONS = ("jupyterlab", "tensorboard")


def dali_label(dali: dict | None) -> str:
    if not dali:
        return ""
    plugin = f"TensorFlow plugin {dali['plugin']}" if dali.get("plugin") else "no TensorFlow plugin"
    return f"{dali.get('version')} ({plugin})"


def tool_versions(report: dict) -> dict[str, str]:
    """The tools' versions installed in the image, from its own package list."""
    have = {canonical_name(k): v for k, v in (report.get("packages") or {}).items()}
    return {n: have[n] for n in TOOL_DISTRIBUTIONS if n in have}
