"""Write tfext/_build_info.py from config.mk: what this build was configured with (and the
TensorFlow it was compiled against), the source it was built from, and the patches and
modified files recorded by nvbuild.sh (NVBUILD_PATCHES_JSON, NVBUILD_MODIFIED_JSON)."""
import hashlib
import json
import os
import pprint
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Build products and configure/nvbuild.sh state: not source.
NOT_SOURCE_DIRS = ("build/", "tests/")
NOT_SOURCE_FILES = {"config.mk", ".tf_configure.bazelrc", ".nvbuild-config"}


def config() -> dict:
    values = {}
    for line in (ROOT / "config.mk").read_text().splitlines():
        m = re.match(r"^([A-Z0-9_]+) := ?(.*)$", line)
        if m:
            values[m.group(1)] = m.group(2).strip()
    return values


def source_digest() -> str:
    """sha256 over the source files (paths and contents), independent of build products."""
    h = hashlib.sha256()
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT).as_posix()
        if not path.is_file() or rel.startswith(NOT_SOURCE_DIRS) or rel in NOT_SOURCE_FILES \
                or "__pycache__" in rel or rel.endswith(".pyc"):
            continue
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def build_info() -> dict:
    c = config()
    archs = [a for a in c.get("CUDA_CC", "").split(",") if a]
    digits = [a.replace(".", "") for a in archs]
    abi = c.get("TF_CXX11_ABI", "")
    return {
        "framework_name": "tfext",
        "version": (ROOT / "VERSION").read_text().strip(),
        "is_cuda_build": c.get("NEED_CUDA") == "1",
        # SASS for every capability, PTX for the newest (cuda_arch.py's gencode rule).
        "cuda_compute_capabilities": [f"sm_{d}" for d in digits] + ([f"compute_{digits[-1]}"] if digits else []),
        "cuda_version": c.get("CUDA_VERSION", "") if c.get("NEED_CUDA") == "1" else "",
        "is_xla_build": c.get("ENABLE_XLA") == "1",
        "tensorflow_version": c.get("TF_VERSION", ""),
        "cxx11_abi": int(abi) if abi.isdigit() else None,
        "source_digest": source_digest(),
        "source_commit": os.environ.get("NVBUILD_SOURCE_COMMIT", ""),
        "patches": json.loads(os.environ.get("NVBUILD_PATCHES_JSON") or "[]"),
        "modified_files": json.loads(os.environ.get("NVBUILD_MODIFIED_JSON") or "[]"),
    }


def main(out: str) -> None:
    Path(out).write_text("# Generated at build time by tools/write_build_info.py.\nBUILD_INFO = "
                         + pprint.pformat(build_info(), sort_dicts=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
