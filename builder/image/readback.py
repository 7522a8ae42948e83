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
from typing import cast

from builder import components
from builder.catalog import Release, Variant
from builder.core import paths
from builder.core.contract import InImage, Label
from builder.core.errors import UserError
from builder.engine import CannotStart
from builder.in_image import cuda_arch, fatbin, libraries
from builder.in_image.report_types import Binary, CoverageCell, ImageReport

REPORT_SCRIPT = InImage.IMAGE_REPORT
# Libraries every GPU image must load (the driver excepted); TensorRT is optional.
REQUIRED_LIBRARIES = ("cudart", "cublas", "cublasLt", "cufft", "curand", "cusolver", "cusparse", "cudnn")


@dataclass
class Findings:
    """What checking an image's report found: problems fail the check, warnings are said."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def content_key(inspect: dict, command: list[str]) -> str:
    """What a report depends on: the image's layers (content-addressed), its runtime config
    and the report command; not its labels, name or creation time. Two images with the same
    key hold the same files and run the report the same way."""
    config = inspect.get("Config") or {}
    parts = {
        "layers": (inspect.get("RootFS") or {}).get("Layers"),
        "env": config.get("Env"),
        "user": config.get("User"),
        "workdir": config.get("WorkingDir"),
        "command": command,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def read_report(
    engine, image: str, requested: list[str] | None = None, coverage: bool = True, store: Path | None = None
) -> ImageReport:
    """Run the image's own report in a throwaway container; a UserError when it cannot.
    With `store`, a report is kept under its content key and reused for an image with the
    same layers and config (a no-op rebuild differs only in its date label)."""
    cmd = ["python3", REPORT_SCRIPT]
    if not coverage:
        cmd.append("--no-coverage")
    if requested:
        cmd += ["--requested", ",".join(requested)]
    kept = store / f"{content_key(engine.inspect(image), cmd)}.json" if store else None
    return cast(ImageReport, with_components(paths.kept_json(kept, lambda: _run_report(engine, image, cmd))))


def with_components(report: dict) -> dict:
    """REPORT with every component under "components": an image whose image_report.py
    predates their folders in builder/components/ (a parent a derive starts from) reports
    Horovod and DALI at the top."""
    held = report.get("components") or {}
    for name in ("horovod", "dali"):
        if report.get(name) and name not in held:
            held = {**held, name: report[name]}
    return {**report, "components": held} if held != (report.get("components") or {}) else report


def _run_report(engine, image: str, cmd: list[str]) -> dict:
    try:
        code, out = engine.run_capture(image, cmd, stdout_only=True, timeout=600)
    except CannotStart as exc:
        raise UserError(_cannot_start(image, exc.why)) from None
    if code != 0:
        _, err = engine.run_capture(image, cmd, timeout=600)
        tail = (err.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{image}: the image could not report what it holds ({REPORT_SCRIPT} exited {code}: {tail})")
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise UserError(f"{image}: {REPORT_SCRIPT} printed no JSON report") from None


def _cannot_start(image: str, why: str) -> str:
    """One line for an image the engine cannot start the report in: most often one with the
    builder's labels but no python3 (a FROM scratch copy, a stripped image)."""
    if "python3" in why and ("not found" in why or "no such file" in why.lower()):
        return f"{image}: the image cannot be read back: it has no python3 to run {REPORT_SCRIPT}"
    return f"{image}: the image cannot be read back: the engine cannot run python3 in it ({why})"


def _short(path: str) -> str:
    return os.path.basename(path)


def _by_capability(coverage: dict) -> list:
    """The coverage table's rows in capability order (the report's JSON sorts its keys as
    text: "10.0" before "6.0")."""
    return sorted(coverage.items(), key=lambda kv: cuda_arch.order(kv[0]))


# --- coverage by component ------------------------------------------------------------------
# The components fatbin.py sorts binaries into, in the order the table lists them:
# what the image builds or installs for itself first, then NVIDIA's libraries, then the rest.
COMPONENT_ORDER = tuple(c for _, c in libraries.PACKAGE_COMPONENTS) + tuple(c for c, _ in libraries.LIBRARY_COMPONENTS)
# The components whose binaries the build checks itself (a requested capability they carry
# no code for fails the build): TensorFlow's wheel, and what nvbuild.sh compiles. A gap in
# the libraries the release pins (NVIDIA's, DALI's) is the pinned version's, and a warning.
CHECKED_COMPONENTS = ("tensorflow", "extension", "horovod")
KIND_RANK = {"none": 0, "ptx": 1, "sass": 2}


def component_name(report: ImageReport, component: str) -> str:
    """'cuDNN 8.5.0': the component's name and, where the image reports one, its version."""
    name = libraries.COMPONENT_NAMES.get(component, component)
    version = {
        "tensorflow": report.get("version"),
        "extension": (report.get("extension") or {}).get("version"),
        "horovod": ((report.get("components") or {}).get("horovod") or {}).get("version"),
        "dali": ((report.get("components") or {}).get("dali") or {}).get("version"),
    }.get(component)
    lib = (report.get("libraries") or {}).get(component) or {}
    version = version or (lib.get("version") if lib.get("loaded") else None)
    return f"{name} {version}" if version else name


def _order_key(component: str) -> tuple:
    return (COMPONENT_ORDER.index(component), "") if component in COMPONENT_ORDER else (len(COMPONENT_ORDER), component)


def coverage_components(report: ImageReport) -> list[dict]:
    """The coverage grouped by component: [{"component", "name", "binaries" (those that count),
    "not_counted" ({path: why}), "unreadable" ({path: why}: fatbins the parser could not walk), "coverage":
    {capability: {"kind", "from", "binaries": [n at that kind, n], "modules"?: [JIT-able,
    all]}}}], in COMPONENT_ORDER.

    A component runs on a GPU only as far as every binary of it with device code does, so
    its verdict for a capability is the worst of theirs: cuDNN 8's six sub-libraries
    (ops/cnn/adv, infer/train) and cuDNN 9's (engines, graph, ops, cnn, adv) each serve
    their own operations, cuBLAS needs cuBLASLt, and a GPU that one of them has no code
    for cannot run what it serves. (cuDNN 9's runtime-compiled engines are compiled by
    NVRTC on the GPU and hold no device code in the image: not counted.) A file's own
    verdict is the best code any of its modules has (cuda_arch.coverage), since NVIDIA's
    libraries pick kernels by GPU; with PTX alone, the "modules" count says how much of it
    can be JIT-compiled (the modules without PTX are for older GPUs only)."""
    binaries = report.get("cuda_binaries") or []
    rows = _by_capability(report.get("coverage") or {})
    groups: dict[str, list[Binary]] = {}
    for b in binaries:
        groups.setdefault(b["component"], []).append(b)
    out = []
    for component in sorted(groups, key=_order_key):
        files = groups[component]
        cells = {}
        for arch, row in rows:
            mine = [(b, row[b["path"]]) for b in files if b["path"] in row]
            if not mine:
                continue
            kind = min((cell["kind"] for _, cell in mine), key=KIND_RANK.__getitem__)
            worst = [(b, cell) for b, cell in mine if cell["kind"] == kind]
            sources = sorted({cell["from"] for _, cell in worst if cell["from"]}, key=lambda s: int(s.split("_")[1]))
            entry: dict = {"kind": kind, "from": _source_range(sources), "binaries": [len(worst), len(mine)]}
            if kind == "ptx":
                jit = sum((cell.get("modules") or [b.get("modules", 0)])[0] for b, cell in worst)
                total = sum(b.get("modules", 0) for b, _ in worst)
                if jit < total:
                    entry["modules"] = [jit, total]
            cells[arch] = entry
        not_counted = {b["path"]: _why_not_counted(b) for b in files if not fatbin.counted(b)}
        out.append(
            {
                "component": component,
                "name": component_name(report, component),
                "binaries": [b["path"] for b in files if fatbin.counted(b)],
                "not_counted": not_counted,
                "unreadable": {
                    b["path"]: b["error"]
                    + ("; read with cuobjdump instead" if b.get("read_by") else "; counted as no code")
                    for b in files
                    if b.get("error")
                },
                "coverage": cells,
            }
        )
    return out


def _source_range(sources: list[str]) -> str:
    """One cell for a component whose binaries differ: sm_60 and sm_61 make "sm_60-61"."""
    if len(sources) < 2:
        return "".join(sources)
    prefix = sources[0].split("_")[0]
    return (
        f"{sources[0]}-{sources[-1].split('_')[1]}"
        if all(s.startswith(prefix + "_") for s in sources)
        else ",".join(sources)
    )


def _why_not_counted(binary: Binary) -> str:
    if binary.get("shadowed_by"):
        return f"not loaded: the loader takes {binary['shadowed_by']} for {binary.get('soname')}"
    if binary.get("kernels_elsewhere"):
        return "its kernels are not in .nv_fatbin (a stub there; the library loads its own): not readable here"
    return "no kernels: its device code is empty modules only"


def _cell_text(cell: CoverageCell | None, modules: str = " ({}/{})") -> str:
    """A table cell: sm_80 (SASS), compute_80 (PTX JIT; with the share of modules that JIT
    when not all do), none; '-' where the component has no binary counted."""
    if not cell:
        return "-"
    if cell["kind"] == "none":
        return "none"
    return cell["from"] + (modules.format(*cell["modules"]) if cell.get("modules") else "")


def _bare(component: dict) -> str:
    """A component's name without its version (the table and the verdict's start have it)."""
    return libraries.COMPONENT_NAMES.get(component["component"], component["component"])


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def coverage_verdicts(report: ImageReport) -> dict[str, dict]:
    """Per capability: {"verdict": "sass" (runs natively) | "ptx" (runs after JIT) | "none"
    (cannot run), "none": [components], "ptx": {component: from}, "sass": [components],
    "text": one line}: the weakest way any component runs on it, the components named."""
    components = coverage_components(report)
    out = {}
    for arch, _ in _by_capability(report.get("coverage") or {}):
        at = {c["component"]: c for c in components if arch in c["coverage"]}
        by_kind = {k: [c for c in at.values() if c["coverage"][arch]["kind"] == k] for k in KIND_RANK}
        verdict = "none" if by_kind["none"] else "ptx" if by_kind["ptx"] else "sass"
        parts = []
        if by_kind["none"]:
            names = [c["name"] for c in by_kind["none"]]
            parts.append(f"cannot run: {_names(names)} {'has' if len(names) == 1 else 'have'} no code for {arch}")
        elif by_kind["ptx"]:
            parts.append("runs after JIT")
        else:
            parts.append(f"runs natively: SASS in every component ({len(at)})" if at else "no CUDA binaries")
        if by_kind["ptx"]:
            parts.append(
                "by JIT: "
                + ", ".join(
                    f"{_bare(c)} ({_cell_text(c['coverage'][arch], ', {}/{} modules')})" for c in by_kind["ptx"]
                )
            )
        if by_kind["sass"] and verdict != "sass":
            parts.append("SASS in " + ", ".join(_bare(c) for c in by_kind["sass"]))
        out[arch] = {
            "verdict": verdict,
            "none": [c["component"] for c in by_kind["none"]],
            "ptx": {c["component"]: c["coverage"][arch]["from"] for c in by_kind["ptx"]},
            "sass": [c["component"] for c in by_kind["sass"]],
            "text": "; ".join(parts),
        }
    return out


def coverage_summary(report: ImageReport, most: int = 3) -> dict[str, str]:
    """Per capability, the weakest way any component runs on it, with (at most MOST of) the
    components that run that way, in COMPONENT_ORDER: {"8.6": "sass", "9.0": "ptx (tensorflow)",
    "12.0": "none (cudnn, nccl)", "10.0": "ptx (tensorflow, extension, cudnn, +4)"}. Compact:
    the image's coverage label is made of it."""
    out = {}
    for arch, v in coverage_verdicts(report).items():
        kind = v["verdict"]
        who = v["none"] if kind == "none" else list(v["ptx"]) if kind == "ptx" else []
        shown = who[:most] + ([f"+{len(who) - most}"] if len(who) > most else [])
        out[arch] = f"{kind} ({', '.join(shown)})" if who else kind
    return out


def coverage_rows(report: ImageReport) -> tuple[list[str], list[list[str]]]:
    """The coverage table: a header (component / binary, then one column per capability),
    then per component a row with its verdicts and one indented row per binary that counts."""
    archs = [arch for arch, _ in _by_capability(report.get("coverage") or {})]
    header = ["COMPONENT / BINARY"] + archs
    rows = []
    coverage = report.get("coverage") or {}
    for c in coverage_components(report):
        if not c["binaries"]:
            continue
        rows.append([c["name"]] + [_cell_text(c["coverage"].get(a)) for a in archs])
        names = [_short(p) for p in c["binaries"]]
        for path in c["binaries"]:
            label = _short(path) if names.count(_short(path)) == 1 else path
            rows.append([f"  {label}"] + [_cell_text(coverage[a].get(path)) for a in archs])
    return header, rows


def check(
    report: ImageReport,
    release: Release,
    variant: Variant,
    requested: list[str],
    toggles: dict[str, bool],
    expect_extension: bool = True,
    expect_components: tuple[str, ...] = (),
) -> Findings:
    """Compare what the image holds with what the catalog and the request say (EXPECT_COMPONENTS:
    the components of builder/components/ it must hold, at the catalog's versions)."""
    v = Findings()
    if report.get("version") != variant.framework_version:
        v.problems.append(
            f"the image holds {report.get('framework_name')} {report.get('version')}, "
            f"the catalog says {variant.framework_version}"
        )
    libs = report.get("libraries") or {}
    if report.get("tensorflow", {}).get("build_info", {}).get("is_cuda_build"):
        for name in REQUIRED_LIBRARIES + (("nccl",) if "nccl" in release.gpu_wheels else ()):
            lib = libs.get(name)
            if not lib or not lib.get("loaded"):
                why = (lib or {}).get("error", "not probed")
                v.problems.append(f"GPU library {name} ({(lib or {}).get('soname', '?')}) does not load: {why}")
        trt = libs.get("tensorrt")
        if trt is not None and not trt.get("loaded"):
            v.warnings.append(
                f"TF-TRT is unavailable: {report['framework_name']} {report['version']} was built against "
                f"TensorRT {report['tensorflow'].get('tensorrt_linked') or '?'} and {trt.get('soname')} "
                "is not in the image (no such wheel on PyPI)"
            )
    for path in report.get("driver_libraries") or []:
        v.problems.append(f"driver library {path} is in the image (the host's NVIDIA container toolkit provides it)")
    ext = report.get("extension")
    if expect_extension:
        if not ext:
            v.problems.append("the extension (tfext) is not installed")
        else:
            want = [f"sm_{a.replace('.', '')}" for a in requested]
            if want and ext.get("cuda_compute_capabilities", [])[: len(want)] != want:
                v.problems.append(
                    f"the extension was compiled for {ext.get('cuda_compute_capabilities')}, "
                    f"requested {','.join(requested)}"
                )
            if bool(ext.get("is_xla_build")) != bool(toggles.get("xla")):
                v.problems.append(
                    f"the extension's XLA kernels are {'in' if ext.get('is_xla_build') else 'not in'} "
                    f"the build, but TF_ENABLE_XLA={int(bool(toggles.get('xla')))}"
                )
    held = report.get("components") or {}
    for name in expect_components:
        v.problems += components.get(name).problems(release.components.get(name), held.get(name))
    coverage_verdict(report, v)
    v.problems += xla_problems(report, toggles)
    fs = report.get("filesystems") or {}
    gs = fs.get("gs")
    if not toggles.get("gcp") and gs and gs.get("available"):
        v.warnings.append(
            f"TF_NEED_GCP=0, but the {report.get('framework_name')} {report.get('version')} wheel "
            "has gs:// built in: it stays available"
        )
    return v


def coverage_verdict(report: ImageReport, v: Findings) -> None:
    """The coverage of the requested capabilities (the rows of the build's report): a binary
    of CHECKED_COMPONENTS with no code for one is a problem; any other component with none
    is a warning, one per capability and component, as is code that runs by PTX JIT."""
    coverage = report.get("coverage") or {}
    for arch, row in _by_capability(coverage):
        for path, cell in row.items():
            if cell["kind"] == "none" and cell["component"] in CHECKED_COMPONENTS:
                v.problems.append(
                    f"compute capability {arch}: {cell['component']} binary {_short(path)} "
                    "carries no code a GPU of it can run (no SASS, no older PTX)"
                )
    for c in coverage_components(report):
        for arch, cell in _by_capability(c["coverage"]):
            files = [p for p in c["binaries"] if coverage[arch].get(p, {}).get("kind") == cell["kind"]]
            which = _short(files[0]) if len(files) == 1 else f"{len(files)} of its {len(c['binaries'])} binaries"
            if cell["kind"] == "none" and c["component"] not in CHECKED_COMPONENTS:
                v.warnings.append(
                    f"compute capability {arch}: {c['name']} has no code a GPU of it can run "
                    f"({which}: no SASS, no older PTX)"
                )
            elif cell["kind"] == "ptx" and c["component"] == "tensorflow":
                v.warnings.append(
                    f"compute capability {arch}: TensorFlow's own kernels run by PTX JIT from "
                    f"{cell['from']} (the first launch on such a GPU compiles them)"
                )
            elif cell["kind"] == "ptx":
                v.warnings.append(
                    f"compute capability {arch}: {c['name']} runs by PTX JIT from {cell['from']} "
                    f"({which}{_modules_text(cell)})"
                )


def _modules_text(cell: dict) -> str:
    return f"; {cell['modules'][0]} of its {cell['modules'][1]} modules have PTX" if cell.get("modules") else ""


def xla_problems(report: ImageReport, toggles: dict[str, bool]) -> list[str]:
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
            out.append(
                f"TF_ENABLE_XLA=1, but XLA's GPU compiler finds no {' and no '.join(missing)} where it looks "
                f"({', '.join(xla.get('data_dir_searched') or [])}; XLA_FLAGS=--xla_gpu_cuda_data_dir=DIR names another)"
            )
    jit = xla.get("cpu_jit_compile") or {}
    if not jit.get("ok"):
        out.append(
            f"TF_ENABLE_XLA=1, but a jit_compile run on the CPU failed: "
            f"{jit.get('error') or 'got %s, expected %s' % (jit.get('result'), jit.get('expected'))}"
        )
    return out


def measured_labels(report: ImageReport) -> dict[str, str]:
    """Labels describing what the image holds, from its own report."""
    ext = report.get("extension") or {}
    fs = report.get("filesystems") or {}
    held = report.get("components") or {}
    hvd = held.get("horovod") or {}
    cov = coverage_summary(report)
    parts = [
        f"{report.get('framework_name')} {report.get('version')} (upstream wheel)"
        if ext
        else f"{report.get('framework_name')} {report.get('version')}"
    ]
    if report.get("cuda_version"):
        parts.append(
            f"CUDA {report['cuda_version']}, cuDNN {report.get('cudnn_version') or 'none'}, "
            f"NCCL {report.get('nccl_version') or 'none'}"
        )
    built = [
        x
        for x in (
            f"{ext.get('framework_name')} {ext.get('version')}" if ext else "",
            f"Horovod {hvd.get('version')}" if hvd else "",
        )
        if x
    ]
    caps = ",".join(cov)
    if built:
        parts.append(f"{' and '.join(built)} compiled for {caps}" if caps else " and ".join(built))
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
        Label.FILESYSTEMS: ",".join(sorted(k for k, x in fs.items() if x.get("available"))),
        Label.COVERAGE: " ".join(f"{a}={k.replace(' ', '')}" for a, k in cov.items()),
        **{c.LABEL: c.versions_text(held.get(c.NAME) or {}) for c in components.REGISTRY},
    }
