"""`builder inspect`: what an image was built from, read from its labels, plus the
framework's own build info, read by running the framework in a container of the image."""
from __future__ import annotations

import json
import subprocess

from builder.errors import UserError
from builder.render import LABEL_PREFIX as LABEL

REPORT_CMD = ("import json, tfref; i = tfref.sysconfig.get_build_info(); "
              "i['cuda_library'] = tfref.sysconfig.get_cuda_library(); print(json.dumps(i))")


def labels_of(engine, image: str) -> dict[str, str]:
    labels = engine.image_labels(image)
    if f"{LABEL}.release" not in labels:
        raise UserError(f"{image} was not built by this builder (no {LABEL}.release label)")
    return labels


def framework_report(image: str) -> dict:
    out = subprocess.run(["docker", "run", "--rm", "--entrypoint", "python3", "-w", "/", image, "-c", REPORT_CMD],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the framework did not report its build info: {tail}"}
    return json.loads(out.stdout)


def describe(engine, image: str) -> dict:
    labels = labels_of(engine, image)
    info = engine.inspect(image)
    g = lambda k: labels.get(f"{LABEL}.{k}", "")  # noqa: E731
    framework = framework_report(image)
    return {
        "image": image,
        "id": info["Id"],
        "release": g("release"),
        "variant": g("variant"),
        "framework": f"{g('framework')} {g('framework-version')}",
        "base_image": g("base-image"),
        "base_kind": g("base"),
        "cuda_compute_capabilities": g("cuda-compute-capabilities"),
        "toggles": {"xla": g("xla") == "1", "gcp": g("gcp") == "1", "hdfs": g("hdfs") == "1"},
        "env_overrides": [e for e in g("env-overrides").split(",") if e],
        "build_id": labels.get("com.nvidia.build.id", ""),
        "build_ref": labels.get("com.nvidia.build.ref", ""),
        "created": labels.get("org.opencontainers.image.created", ""),
        "parent": g("parent"),
        "patches": json.loads(g("patches") or "[]"),
        "framework_build_info": framework,
        "cuda_library": framework.get("cuda_library", ""),
        "size_bytes": info.get("Size", 0),
    }
