"""`builder inspect`: what an image was built from (its labels) and what it holds, read
now from a container of the image (image_report.py), never from the request. Also the
one aligned-table writer (the coverage table, and the `builder releases` list)."""

from __future__ import annotations

import json
import textwrap

from builder import components
from builder.catalog import driver
from builder.core.contract import BuildInfo, Label
from builder.core.errors import UserError
from builder.core.output import human_size
from builder.core.terminal import escape
from builder.engine import Engine
from builder.image import readback
from builder.in_image import cuda_arch
from builder.in_image.report_types import ImageReport


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
        report["coverage_note"] = (
            f"a runtime image's CUDA binaries are those of {runtime_of}: builder inspect {runtime_of} --coverage"
        )
    libs = {
        name: {k: lib.get(k) for k in ("soname", "loaded", "version", "path", "error") if k in lib}
        for name, lib in (report.get("libraries") or {}).items()
    }
    return {
        "image": image,
        "id": info["Id"],
        "release": g(Label.RELEASE),
        "variant": g(Label.VARIANT),
        "framework": f"{report.get(BuildInfo.FRAMEWORK_NAME)} {report.get(BuildInfo.VERSION)}",
        "python": report.get("python"),
        "versions": {
            "cuda": report.get("cuda_version"),
            "cudnn": report.get("cudnn_version"),
            "nccl": report.get("nccl_version"),
            "tensorrt": report.get("tensorrt_version"),
            "extension": (report.get("extension") or {}).get("version", ""),
        },
        # builder/components/ the image holds: component -> its report entry (for probes:
        # tool -> version, path, package version)
        "components": report.get("components") or {},
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
        "size_bytes": info.get("Size", 0),
        "runtime_of": runtime_of,
        "vendor": " ".join(x for x in (g(Label.VENDOR), f"<{g(Label.AUTHORS)}>" if g(Label.AUTHORS) else "") if x),
        "platform": f"{info.get('Os', '')}/{info.get('Architecture', '')}".strip("/"),
        "labels": labels,
        "env": dict(e.split("=", 1) for e in (info.get("Config") or {}).get("Env") or [] if "=" in e),
        "entrypoint": (info.get("Config") or {}).get("Entrypoint") or [],
        "_report": report,
    }


COVERAGE_LEGEND = (
    "sm_XY: SASS, runs natively; compute_XY: PTX, runs after JIT (n/m: the modules that have it, "
    "when not all do); none: no code for that GPU; -: no binary"
)


def coverage_text(report: ImageReport) -> str:
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
        lines += textwrap.wrap(
            v["text"],
            110,
            initial_indent=f"{arch.ljust(width)}  ",
            subsequent_indent=" " * (width + 4),
            break_on_hyphens=False,
        )
    return "\n".join(lines)


def report_text(report: dict, coverage: bool = False, as_json: bool = False) -> str:
    """`builder inspect`'s output for a describe() report: the coverage table, JSON or the summary."""
    raw = report.pop("_report")
    if coverage:
        return coverage_text(raw)
    if as_json:
        return json.dumps(report, indent=2, sort_keys=True)
    return summary_text(report)


def releases_rows(catalog) -> list[dict]:
    """`builder releases`: one row per release with both bases it can stand on (OS, Python,
    CUDA): the offline one `--base auto` takes on every machine, and NVIDIA's upstream one."""
    rows = []
    for r in catalog.releases.values():
        rows.append(
            {
                "release": r.name,
                "parent": r.parent,
                "variants": {v.name: f"{v.framework_name} {v.framework_version}" for v in r.variants.values()},
                "bases": driver.bases(r),
            }
        )
    return rows


def _base_cell(base: dict) -> str:
    return f"{base['os']}, Python {base['python']}, CUDA {base['cuda_toolkit']}"


def releases_text(rows: list[dict]) -> str:
    """`builder releases`: the rows as a table; the libraries' CUDA where wheels bring it."""
    table = table_text(
        ("RELEASE", "VARIANTS", "BASE (default: --base auto)", "UPSTREAM BASE (--base upstream)"),
        [
            (
                r["release"],
                ", ".join(f"{k} ({v})" for k, v in r["variants"].items()),
                _base_cell(r["bases"]["offline"]),
                _base_cell(r["bases"]["upstream"]),
            )
            for r in rows
        ],
    )
    wheels = [
        f"{r['release']}: {r['bases']['offline']['cuda_libraries']}"
        for r in rows
        if "NVIDIA's wheels" in r["bases"]["offline"]["cuda_libraries"]
    ]
    notes = (
        ["", "CUDA is the base's toolkit (it compiles). Libraries TensorFlow loads from NVIDIA's wheels:"]
        + [f"  {w}" for w in wheels]
        if wheels
        else []
    )
    return "\n".join([table, *notes])


def table_text(header, rows) -> str:
    """Columns aligned by their widest cell, two spaces apart, no trailing blanks; each cell
    escaped (labels and reports come from the image: no control reaches the terminal)."""
    table = [tuple(escape(str(c)) for c in row) for row in [header, *rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table)


def _on_off(toggles: dict) -> str:
    return ", ".join(f"{k.upper()} {'on' if v else 'off'}" for k, v in toggles.items())


def summary_text(report: dict) -> str:
    """`builder inspect` without --json: what a user asks first, as aligned sections; an
    empty field is left out, not printed blank (--json has every field)."""
    r = report
    about = [
        ("Image", f"{r['image']} ({r['id'].split(':')[-1][:12]}, {human_size(r.get('size_bytes') or 0)})"),
        (
            "Release",
            f"{r['release']} {r['variant']}" + (f", runtime image of {r['runtime_of']}" if r.get("runtime_of") else ""),
        ),
        ("Made by", r.get("vendor") or ""),
        (
            "Built",
            " ".join(
                x
                for x in (
                    r.get("created"),
                    f"build {r['build_id']}" if r.get("build_id") else "",
                    f"from {r['build_ref']}" if r.get("build_ref") else "",
                )
                if x
            ),
        ),
        ("Derived from", r.get("parent") or ""),
        ("Base", f"{r.get('base_kind') or '?'}: {r.get('base_image')}" if r.get("base_image") else ""),
        ("Platform", r.get("platform") or ""),
        ("Framework", f"{r['framework']} (Python {r.get('python')}); {_on_off(r.get('toggles') or {})}"),
        ("TF-TRT", r.get("tf_trt") or ""),
        ("Without", ", ".join(r.get("without") or [])),
        ("Env overrides", ", ".join(r.get("env_overrides") or [])),
        ("Patches", ", ".join(p.get("name", "?") if isinstance(p, dict) else str(p) for p in r.get("patches") or [])),
        ("Filesystems", ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in (r.get("filesystems") or {}).items())),
        (
            "Driver libraries",
            ", ".join(r.get("driver_libraries") or []) or "none (the NVIDIA container toolkit brings the host's)",
        ),
    ]
    lines = [table_text(("", ""), [(f"{k}:", v) for k, v in about if v]).split("\n", 1)[-1]]
    versions = [(k, v) for k, v in (r.get("versions") or {}).items() if v]
    versions += [
        row
        for name, found in sorted((r.get("components") or {}).items())
        if name in components.NAMES
        for row in components.get(name).rows(found or {})
    ]
    lines += ["", table_text(("PART", "VERSION"), versions)]
    libs = [
        (
            name,
            lib.get("soname", ""),
            lib.get("version") or "",
            "yes" if lib.get("loaded") else "NO",
            lib.get("path") or lib.get("error") or "",
        )
        for name, lib in (r.get("libraries") or {}).items()
    ]
    if libs:
        lines += ["", table_text(("LIBRARY", "SONAME", "VERSION", "LOADS", "PATH / ERROR"), libs)]
    coverage = r.get("coverage") or {}
    if coverage:
        lines += [
            "",
            table_text(("GPU", "CODE (weakest part)"), [(a, v) for a, v in coverage.items()]),
            "(builder inspect IMAGE --coverage: per CUDA binary)",
        ]
    return "\n".join(lines)
