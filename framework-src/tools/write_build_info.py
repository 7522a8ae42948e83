"""Write tfref/_build_info.py from config.mk: what this build was configured with,
the source it was built from, and the patches recorded by nvbuild.sh."""
import hashlib
import json
import os
import pprint
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def config() -> dict:
    values = {}
    for line in (ROOT / "config.mk").read_text().splitlines():
        m = re.match(r"^([A-Z_]+) := ?(.*)$", line)
        if m:
            values[m.group(1)] = m.group(2).strip()
    return values


def source_digest() -> str:
    """sha256 over the source files (paths and contents), independent of build products."""
    h = hashlib.sha256()
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT).as_posix()
        if not path.is_file() or rel.startswith(("build/", "tests/")) or rel in ("config.mk", ".tf_configure.bazelrc") \
                or "__pycache__" in rel:
            continue
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def main(out: str) -> None:
    c = config()
    archs = [a for a in c.get("CUDA_CC", "").split(",") if a]
    digits = [a.replace(".", "") for a in archs]
    info = {
        "framework_name": "tfref",
        "version": (ROOT / "VERSION").read_text().strip(),
        "is_cuda_build": c.get("NEED_CUDA") == "1",
        "cuda_compute_capabilities": [f"sm_{d}" for d in digits] + ([f"compute_{digits[-1]}"] if digits else []),
        "cuda_version": c.get("CUDA_VERSION", ""),
        "cudnn_version": c.get("CUDNN_VERSION", ""),
        "nccl_version": c.get("NCCL_VERSION", ""),
        "is_xla_build": c.get("ENABLE_XLA") == "1",
        "is_gcp_build": c.get("NEED_GCP") == "1",
        "is_hdfs_build": c.get("NEED_HDFS") == "1",
        "is_tensorrt_build": c.get("NEED_TENSORRT") == "1",
        "source_digest": source_digest(),
        "source_commit": os.environ.get("NVBUILD_SOURCE_COMMIT", ""),
        "patches": json.loads(os.environ.get("NVBUILD_PATCHES_JSON", "[]")),
        "modified_files": json.loads(os.environ.get("NVBUILD_MODIFIED_JSON", "[]")),
    }
    Path(out).write_text("# Generated at build time by tools/write_build_info.py.\nBUILD_INFO = "
                         + pprint.pformat(info, sort_dicts=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
