"""`builder inspect`: what an image was built from (its labels) and what it holds, read
now from a container of the image (image_report.py), never from the request. Also the
one aligned-table writer (the coverage table, and the `builder releases` list)."""
from __future__ import annotations

import json
import textwrap

from builder import cuda_arch, readback
from builder.engine import Engine
from builder.errors import UserError
from builder.contract import BuildInfo, Label


def labels_of(engine: Engine, image: str) -> dict[str, str]:
    labels = engine.image_labels(image)
    if Label.RELEASE not in labels:
        raise UserError(f"{image} was not built by this builder (no {Label.RELEASE} label)")
    return labels


def requested_capabilities(labels: dict[str, str]) -> list[str]:
    return [a for a in labels.get(Label.CUDA_COMPUTE_CAPABILITIES, "").split(",") if a and a != "local"]


def describe(engine: Engine, image: str, extra_capabilities: list[str] | None = None) -> dict:
    labels = labels_of(engine, image)
    info = engine.inspect(image)
    g = lambda k: labels.get(k, "")  # noqa: E731
    requested = requested_capabilities(labels)
    for arch in extra_capabilities or []:
        if arch not in requested:
            requested.append(arch)
    # every image answers for the fleet's GPUs too (Turing to Blackwell), built for them or not
    rows = sorted(set(requested) | set(cuda_arch.FLEET), key=cuda_arch.order)
    # a runtime image's CUDA binaries are its devel image's (its label is the devel image's
    # too): its coverage is answered there
    runtime_of = g(Label.RUNTIME_OF)
    report = readback.read_report(engine, image, rows, coverage=not runtime_of)
    if runtime_of:
        report["coverage_note"] = (f"a runtime image's CUDA binaries are those of {runtime_of}: "
                                   f"builder inspect {runtime_of} --coverage")
    libs = {name: {k: lib.get(k) for k in ("soname", "loaded", "version", "path", "error") if k in lib}
            for name, lib in (report.get("libraries") or {}).items()}
    return {
        "image": image,
        "id": info["Id"],
        "release": g(Label.RELEASE),
        "variant": g(Label.VARIANT),
        "framework": f"{report.get(BuildInfo.FRAMEWORK_NAME)} {report.get(BuildInfo.VERSION)}",
        "python": report.get("python"),
        "versions": {"cuda": report.get("cuda_version"), "cudnn": report.get("cudnn_version"),
                     "nccl": report.get("nccl_version"), "tensorrt": report.get("tensorrt_version"),
                     "horovod": (report.get("horovod") or {}).get("version", ""),
                     "dali": (report.get("dali") or {}).get("version", ""),
                     "dali_tf_plugin": (report.get("dali") or {}).get("plugin") or "",
                     "extension": (report.get("extension") or {}).get("version", "")},
        "tools": readback.tool_versions(report),
        "without": [c for c in g(Label.WITHOUT).split(",") if c],
        "tf_trt": "available" if report.get("tf_trt_available") else "unavailable",
        "libraries": libs,
        "driver_libraries": report.get("driver_libraries", []),
        "filesystems": {k: v.get("available") for k, v in (report.get("filesystems") or {}).items()},
        "base_image": g(Label.BASE_IMAGE),
        "base_kind": g(Label.BASE),
        "cuda_compute_capabilities": ",".join(requested),
        "coverage": readback.coverage_summary(report),
        "coverage_verdicts": readback.coverage_verdicts(report),
        "coverage_components": readback.coverage_components(report),
        "coverage_table": report.get("coverage", {}),
        "cuda_binaries": report.get("cuda_binaries", []),
        "toggles": {"xla": g(Label.XLA) == "1", "gcp": g(Label.GCP) == "1", "hdfs": g(Label.HDFS) == "1"},
        "env_overrides": [e for e in g(Label.ENV_OVERRIDES).split(",") if e],
        "build_id": g(Label.BUILD_ID),
        "build_ref": g(Label.BUILD_REF),
        "created": g(Label.CREATED),
        "parent": g(Label.PARENT),
        "patches": json.loads(g(Label.PATCHES) or "[]"),
        "tensorflow_build_info": (report.get("tensorflow") or {}).get("build_info", {}),
        "extension_build_info": report.get("extension") or {},
        "horovod": report.get("horovod") or {},
        "size_bytes": info.get("Size", 0),
        "runtime_of": runtime_of,
        "_report": report,
    }


COVERAGE_LEGEND = ("sm_XY: SASS, runs natively; compute_XY: PTX, runs after JIT (n/m: the modules that have it, "
                   "when not all do); none: no code for that GPU; -: no binary")


def coverage_text(report: dict) -> str:
    """`builder inspect --coverage`: the coverage table grouped by component (a component's
    row is the worst of its binaries'), the binaries not counted and why, then one verdict
    line per capability."""
    if report.get("coverage_note"):
        return report["coverage_note"]
    header, rows = readback.coverage_rows(report)
    if len(header) < 2:
        return "no compute capabilities requested"
    lines = [table_text(header, rows), "", COVERAGE_LEGEND]
    components = readback.coverage_components(report)
    skipped = [(path, why) for c in components for path, why in c["not_counted"].items()]
    if skipped:
        lines += ["", "Not counted:"] + [f"  {path}: {why}" for path, why in skipped]
    unreadable = [(path, error) for c in components for path, error in c["unreadable"].items()]
    if unreadable:
        lines += ["", "Device code the parser could not read:"] + [f"  {path}: {why}" for path, why in unreadable]
    verdicts = readback.coverage_verdicts(report)
    width = max(len(a) for a in verdicts)
    lines.append("")
    for arch, v in verdicts.items():
        lines += textwrap.wrap(v["text"], 110, initial_indent=f"{arch.ljust(width)}  ",
                               subsequent_indent=" " * (width + 4), break_on_hyphens=False)
    return "\n".join(lines)


def report_text(report: dict, coverage: bool = False, as_json: bool = False) -> str:
    """`builder inspect`'s output for a describe() report: the coverage table, JSON or the summary."""
    raw = report.pop("_report")
    if coverage:
        return coverage_text(raw)
    if as_json:
        return json.dumps(report, indent=2, sort_keys=True)
    return summary_text(report)


def releases_text(rows: list[dict]) -> str:
    """`builder releases`: the catalog's summary rows as a table."""
    return table_text(("RELEASE", "OS", "PYTHON", "CUDA", "VARIANTS", "OFFLINE BASE"),
                      [(r["release"], r["os"], r["python"], r["cuda"],
                        ", ".join(f"{k} ({v})" for k, v in r["variants"].items()), r["offline_base"]) for r in rows])


def table_text(header, rows) -> str:
    """Columns aligned by their widest cell, two spaces apart, no trailing blanks."""
    table = [tuple(str(c) for c in row) for row in [header, *rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table)


def summary_text(report: dict) -> str:
    """`builder inspect` without --json: the report's scalar fields and small tables."""
    lines = []
    for key, value in report.items():
        if key in ("coverage_table", "coverage_verdicts", "coverage_components", "cuda_binaries",
                   "tensorflow_build_info", "extension_build_info"):
            continue
        if isinstance(value, dict):
            lines.append(f"{key}:")
            lines += [f"  {k}: {v}" for k, v in value.items()]
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)
