"""Contract test of nvbuild.sh's TensorFlow driver.

It runs the real nvbuild.sh against a minimal TensorFlow-shaped tree with a recording
`bazel` (and an `nvcc` that reports CUDA 11.4) on PATH. It proves which environment the
configure step receives and which flags and targets reach bazel and build_pip_package,
and that the phases run in order; nothing more: no TensorFlow is compiled here.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from builder import catalog
from builder.render import RenderOptions, render
from builder.render.base_recipe import BaseRecipe

from .conftest import STUB_REPORT

ROOT = Path(__file__).resolve().parents[2]

FAKE_BAZEL = r'''#!/usr/bin/env python3
"""Records its argv; `build` leaves a build_pip_package that makes a tiny tensorflow wheel."""
import base64, hashlib, json, os, sys, zipfile
from pathlib import Path
log = Path(os.environ["RECORD_DIR"]) / "calls.jsonl"
with log.open("a") as f:
    f.write(json.dumps(["bazel"] + sys.argv[1:]) + "\n")
if sys.argv[1:2] == ["build"]:
    tool = Path("bazel-bin/tensorflow/tools/pip_package/build_pip_package")
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.write_text("#!/usr/bin/env python3\n" + open(os.environ["RECORD_DIR"] + "/build_pip_package.py").read())
    tool.chmod(0o755)
'''

FAKE_BUILD_PIP_PACKAGE = r"""
import base64, hashlib, json, os, sys, zipfile
from pathlib import Path
with (Path(os.environ["RECORD_DIR"]) / "calls.jsonl").open("a") as f:
    f.write(json.dumps(["build_pip_package"] + sys.argv[1:]) + "\n")
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
files = {
    "tensorflow/__init__.py": "__version__ = '2.5.0'\nfrom tensorflow import sysconfig\n",
    "tensorflow/sysconfig.py": "def get_build_info():\n    return {'cuda_compute_capabilities': ['sm_70', 'sm_86', 'compute_86'], 'is_cuda_build': True}\n",
    "tensorflow-2.5.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.5.0\n",
    "tensorflow-2.5.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: fake\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(text.encode())}")
record.append("tensorflow-2.5.0.dist-info/RECORD,,")
with zipfile.ZipFile(out / "tensorflow-2.5.0-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
    z.writestr("tensorflow-2.5.0.dist-info/RECORD", "\n".join(record) + "\n")
"""

FAKE_CONFIGURE = r"""
import json, os
keys = ["TF_NEED_CUDA", "TF_CUDA_COMPUTE_CAPABILITIES", "TF_CUDA_VERSION", "TF_CUDNN_VERSION", "TF_NCCL_VERSION",
        "TF_ENABLE_XLA", "TF_NEED_GCP", "TF_NEED_HDFS", "TF_NEED_TENSORRT", "PYTHON_BIN_PATH", "CC_OPT_FLAGS"]
with open(os.path.join(os.environ["RECORD_DIR"], "calls.jsonl"), "a") as f:
    f.write(json.dumps(["configure.py", {k: os.environ.get(k) for k in keys}]) + "\n")
open(".tf_configure.bazelrc", "w").write('build --action_env TF_CUDA_COMPUTE_CAPABILITIES="%s"\n'
                                        % os.environ["TF_CUDA_COMPUTE_CAPABILITIES"])
"""


@pytest.fixture
def tree(tmp_path, venv):
    opt = tmp_path / "opt"
    src = opt / "tensorflow-source"
    (src / "tensorflow").mkdir(parents=True)
    (src / "configure.py").write_text(FAKE_CONFIGURE)
    (src / "tensorflow" / "core" / "public").mkdir(parents=True)  # a 2.5 tree: the configure way
    (src / "tensorflow" / "core" / "public" / "version.h").write_text(
        "#define TF_MAJOR_VERSION 2\n#define TF_MINOR_VERSION 5\n#define TF_PATCH_VERSION 0\n"
    )
    shutil.copy(ROOT / "nvbuild.sh", opt)
    (opt / "image_report.py").write_text(STUB_REPORT)
    shutil.copy(ROOT / "builder" / "in_image" / "cuda_arch.py", opt)
    rel = catalog.load().get("21.08")
    rendered = render(rel, rel.variant("tf2-py3"), RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag))
    (opt / "nvbuildopts").write_text(rendered.files["nvbuildopts"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bazel").write_text(FAKE_BAZEL)
    (bin_dir / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 11.4, V11.4.100'\n")
    for tool in ("bazel", "nvcc"):
        (bin_dir / tool).chmod(0o755)
    record = tmp_path / "record"
    record.mkdir()
    (record / "build_pip_package.py").write_text(FAKE_BUILD_PIP_PACKAGE)
    env = {
        "PATH": f"{bin_dir}:{Path(venv).parent}:/usr/bin:/bin",
        "RECORD_DIR": str(record),
        "PYTHON_BIN_PATH": str(venv),
        "NVBUILD_WHEEL_DIR": str(tmp_path / "pip"),
        "NVBUILD_BUILD_INFO": str(tmp_path / "build-info.json"),
        "NVBUILD_SM_ALL": "5.2,6.0,6.1,7.0,7.5,8.0,8.6",
        "TF_ENABLE_XLA": "1",
        "TF_NEED_GCP": "0",
        "TF_NEED_HDFS": "1",
        "HOME": str(tmp_path),
    }

    def run(*args):
        proc = subprocess.run(
            ["bash", str(opt / "nvbuild.sh"), *args], capture_output=True, text=True, env=env, timeout=300
        )
        calls = (
            [json.loads(line) for line in (record / "calls.jsonl").read_text().splitlines()]
            if (record / "calls.jsonl").exists()
            else []
        )
        (record / "calls.jsonl").unlink(missing_ok=True)
        return proc, calls

    run.tmp = tmp_path
    return run


def test_configure_bazel_package_install_in_order(tree):
    proc, calls = tree("--sm", "86,70")
    assert proc.returncode == 0, proc.stderr
    assert [c[0] for c in calls] == ["configure.py", "bazel", "build_pip_package", "bazel"]
    env = calls[0][1]
    assert env["TF_NEED_CUDA"] == "1" and env["TF_CUDA_VERSION"] == "11.4"
    assert env["TF_CUDA_COMPUTE_CAPABILITIES"] == "7.0,8.6"
    assert (env["TF_ENABLE_XLA"], env["TF_NEED_GCP"], env["TF_NEED_HDFS"]) == ("1", "0", "1")
    assert env["TF_NEED_TENSORRT"] == "0" and env["PYTHON_BIN_PATH"].endswith("/bin/python")
    assert env["CC_OPT_FLAGS"]
    assert calls[1] == [
        "bazel",
        "build",
        "--config=v2",
        "-c",
        "opt",
        "--config=cuda",
        "--output_filter=MATCH_NOTHING",
        "//tensorflow/tools/pip_package:build_pip_package",
    ]
    assert calls[2] == ["build_pip_package", str(tree.tmp / "pip"), "--gpu", "--project_name", "tensorflow"]
    assert calls[3] == ["bazel", "clean", "--expunge"]
    info = json.loads((tree.tmp / "build-info.json").read_text())
    assert info["framework_name"] == "TensorFlow" and info["version"] == "2.5.0"


@pytest.fixture
def http_cache(loopback_http):
    return f"{loopback_http}/bazel"


def test_cache_flags_and_no_reconfigure_when_nothing_changed(tree, http_cache):
    proc, calls = tree("--sm", "8.6", "--noclean", "--cache", http_cache)
    assert proc.returncode == 0, proc.stderr
    bazel = next(c for c in calls if c[0] == "bazel")
    assert f"--remote_cache={http_cache}" in bazel and "--remote_local_fallback" in bazel
    assert ["bazel", "clean", "--expunge"] not in calls
    proc, calls = tree("--sm", "8.6", "--noclean")
    assert proc.returncode == 0 and "configuration unchanged" in proc.stderr
    assert [c[0] for c in calls] == ["bazel", "build_pip_package"]
    proc, calls = tree("--sm", "8.0", "--noclean")
    assert calls[0][0] == "configure.py" and calls[0][1]["TF_CUDA_COMPUTE_CAPABILITIES"] == "8.0"


def test_an_unreachable_cache_means_a_plain_build_with_a_warning(tree):
    proc, calls = tree("--sm", "8.6", "--cache", "http://127.0.0.1:1/bazel")
    assert proc.returncode == 0, proc.stderr
    assert "warning: compile cache http://127.0.0.1:1/bazel does not answer; compiling without it" in proc.stderr
    assert not any(a.startswith("--remote_cache") for a in next(c for c in calls if c[0] == "bazel"))


def test_configonly_and_phase_named_failures(tree):
    proc, calls = tree("--configonly", "--sm", "all")
    assert proc.returncode == 0 and [c[0] for c in calls] == ["configure.py"]
    assert calls[0][1]["TF_CUDA_COMPUTE_CAPABILITIES"] == "5.2,6.0,6.1,7.0,7.5,8.0,8.6"
    proc, _ = tree("--sm", "9.9")
    assert proc.returncode != 0 and "configure phase failed" in proc.stderr and "9.9" in proc.stderr
    proc, _ = tree("--sm", "local")
    assert proc.returncode != 0 and "no GPU is visible at build time" in proc.stderr
    proc, _ = tree("--bogus")
    assert proc.returncode == 2 and "UNKNOWN OPTION --bogus" in proc.stderr
    proc, _ = tree("--python3.99")
    assert proc.returncode == 2 and "/usr/bin/python3.99 is not installed" in proc.stderr
