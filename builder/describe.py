"""`builder inspect`: what an image was built from (its labels) and what it holds, read
now from a container of the image (image_report.py), never from the request. Also the
one aligned-table writer (the coverage table, and the `builder releases` list)."""
from __future__ import annotations

import json

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
    # a runtime image has no cuobjdump: its CUDA binaries are its devel image's, listed there
    runtime_of = g(Label.RUNTIME_OF)
    report = readback.read_report(engine, image, rows, coverage=not runtime_of)
    if runtime_of:
        report["coverage_note"] = (f"a runtime image lists no CUDA binaries (no cuobjdump); they are those of "
                                   f"{runtime_of}: builder inspect {runtime_of} --coverage")
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


def coverage_text(report: dict) -> str:
    """The coverage table as aligned text."""
    if report.get("coverage_note"):
        return report["coverage_note"]
    header, rows = readback.coverage_rows(report)
    if not rows:
        return "no compute capabilities requested"
    return table_text(header, rows)


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
        if key in ("coverage_table", "cuda_binaries", "tensorflow_build_info", "extension_build_info"):
            continue
        if isinstance(value, dict):
            lines.append(f"{key}:")
            lines += [f"  {k}: {v}" for k, v in value.items()]
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)
