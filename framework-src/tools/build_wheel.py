"""Package the staged tfext tree (STAGE/tfext) as a platform wheel in WHEEL_DIR.

Written with the standard library (zipfile + the wheel format's three metadata files), so
packaging does not depend on which setuptools/wheel the image carries; the result is
reproducible (fixed timestamps, sorted entries). The wheel pins the TensorFlow version the
op library was compiled against (its C++ ABI is that release's).

Usage: build_wheel.py STAGE WHEEL_DIR
"""
import base64
import hashlib
import re
import sys
import sysconfig
import zipfile
from pathlib import Path

from write_build_info import config  # run as a script: tools/ is on sys.path

ROOT = Path(__file__).resolve().parent.parent
NAME = "tfext"
EPOCH = (1980, 1, 1, 0, 0, 0)


def tag() -> str:
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{py}-{py}-{plat}"


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main(stage: str, wheel_dir: str) -> None:
    version = (ROOT / "VERSION").read_text().strip()
    tf_version = config().get("TF_VERSION", "")
    dist_info = f"{NAME}-{version}.dist-info"
    files = {p.relative_to(stage).as_posix(): p.read_bytes()
             for p in sorted(Path(stage, NAME).rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        "Summary: TensorFlow custom ops (CPU, CUDA and XLA kernels) compiled by nvbuild.sh",
        "Requires-Python: >=3.7",
        *( [f"Requires-Dist: tensorflow=={tf_version}"] if tf_version else [] ),
        "",
    ])
    wheel_meta = "\n".join(["Wheel-Version: 1.0", "Generator: tfext tools/build_wheel.py",
                            "Root-Is-Purelib: false", f"Tag: {tag()}", ""])
    files[f"{dist_info}/METADATA"] = metadata.encode()
    files[f"{dist_info}/WHEEL"] = wheel_meta.encode()
    files[f"{dist_info}/top_level.txt"] = f"{NAME}\n".encode()
    record = "".join(f"{name},{record_hash(data)},{len(data)}\n" for name, data in files.items())
    record += f"{dist_info}/RECORD,,\n"
    files[f"{dist_info}/RECORD"] = record.encode()

    out = Path(wheel_dir, f"{NAME}-{version}-{tag()}.whl")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, EPOCH)
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    print(f"WHEEL {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
