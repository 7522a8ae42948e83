"""Conformance of a release image: the real framework at the catalog's version, the GPU
libraries it loads, no driver libraries, the compiled parts (extension, Horovod) built for
the requested capabilities and working, examples that train, and labels that say what
the image really holds. Everything is asked of a container of the image."""

import json
import re

import pytest

from builder import components
from builder.catalog import LABEL_AUTHORS, LABEL_MAINTAINER, LABEL_URL, LABEL_VENDOR
from builder.core import contract
from builder.core.contract import InImage, Label
from builder.image import readback
from builder.image.conformance.plugin import gpu_visible
from builder.in_image import cuda_arch
from builder.render import banner_release_line

SECTION_6 = ("TF_CUDA_COMPUTE_CAPABILITIES", "TF_ENABLE_XLA", "TF_NEED_GCP", "TF_NEED_HDFS")


def requested(labels) -> list[str]:
    return [a for a in labels[Label.CUDA_COMPUTE_CAPABILITIES].split(",") if a]


def digits(archs) -> list[str]:
    return sorted({a.replace(".", "") for a in archs}, key=int)


# --- layout and environment ----------------------------------------------------------------
def test_layout(host):
    nvbuild = host.file(InImage.NVBUILD)
    assert nvbuild.is_file and nvbuild.mode & 0o111
    for path in (*(f"{InImage.HOME}/{f}" for f in InImage.BUILD_FILES), InImage.BUILD_INFO):
        assert host.file(path).is_file, path
    assert host.file(InImage.SOURCE).is_directory
    assert host.file(InImage.LOCKS).is_directory
    for d in (InImage.NVIDIA_EXAMPLES, InImage.DOCKER_EXAMPLES):
        assert host.file(d).is_directory
    for f in ("Dockerfile.customtensorflow", "Dockerfile.addpackages", "README.md"):
        assert host.file(f"{InImage.DOCKER_EXAMPLES}/{f}").is_file
    assert host.file(InImage.ENTRYPOINT).mode & 0o111


def test_build_state_was_cleaned(host):
    """nvbuild.sh removes objects and wheels unless --noclean: they are not in the image."""
    assert not host.file(f"{InImage.SOURCE}/build").exists
    assert not host.file("/tmp/pip").exists


def test_every_env_default_has_the_release_value(release_data, labels, image_env, host):
    rel, variant = release_data
    overridden = set(filter(None, labels.get(Label.ENV_OVERRIDES, "").split(",")))
    expected = {**rel.env, **variant.env, "NVIDIA_TENSORFLOW_VERSION": f"{rel.name}-{variant.short}"}
    for name, value in expected.items():
        if name in overridden:
            continue
        assert image_env.get(name) == value, name
        assert host.run(f"printenv {name}").stdout.strip() == value, name


def test_build_parameters_match_labels(labels, image_env):
    assert image_env["TF_CUDA_COMPUTE_CAPABILITIES"] == labels[Label.CUDA_COMPUTE_CAPABILITIES]
    assert image_env["TF_ENABLE_XLA"] == labels[Label.XLA]
    assert image_env["TF_NEED_GCP"] == labels[Label.GCP]
    assert image_env["TF_NEED_HDFS"] == labels[Label.HDFS]


def test_labels_record_the_build(labels, image_env, release_data):
    rel, variant = release_data
    assert labels[Label.VERSION] == variant.tag
    assert labels[Label.BUILD_ID] == image_env["NVIDIA_BUILD_ID"] != ""
    assert labels[Label.BASE_NAME] == labels[Label.BASE_IMAGE] != ""
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", labels[Label.CREATED])


# --- the framework ------------------------------------------------------------------------------
def test_tensorflow_is_the_catalogs_version(python, release_data):
    _, variant = release_data
    out = python("import tensorflow as tf; print(tf.__version__)")
    assert out.rc == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == variant.framework_version


def test_labels_equal_what_the_image_reports(labels, report):
    """Labels are what the image holds, not what was asked for."""
    measured = readback.measured_labels(report)
    assert {k: labels.get(k) for k in measured} == measured
    assert labels[Label.FRAMEWORK_VERSION] == report["version"]


def test_report_agrees_with_the_catalog(report, release_data, labels):
    rel, variant = release_data
    toggles = {"xla": labels[Label.XLA] == "1", "gcp": labels[Label.GCP] == "1", "hdfs": labels[Label.HDFS] == "1"}
    held = tuple(n for n in rel.components if labels.get(components.get(n).LABEL))  # as its labels say
    verdict = readback.check(report, rel, variant, requested(labels), toggles, expect_components=held)
    assert verdict.problems == []


def test_build_info_is_what_the_framework_reported(build_info, report):
    """build-info.json (the banner's source) was written by the same report at build time."""
    for key in ("framework_name", "version", "cuda_version", "cudnn_version", "nccl_version", "python"):
        assert build_info[key] == report[key], key
    assert (build_info.get("extension") or {}).get("source_digest") == (report.get("extension") or {}).get(
        "source_digest"
    )
    # the components the image held at the compile (all but those installed after it), read back the same
    at_compile = build_info.get("components") or {}
    held = report.get("components") or {}
    for name in held:
        assert name in at_compile or name not in components.NAMES or components.get(name).WHERE == "after-compile"
    for name, entry in at_compile.items():  # (a derive's rebuild recorded those after it too)
        assert entry == held.get(name), name


def test_gpu_libraries_load_and_no_driver_library_is_in_the_image(report, host):
    libs = report["libraries"]
    for name in readback.REQUIRED_LIBRARIES:
        assert libs[name]["loaded"], (name, libs[name])
        assert libs[name]["version"], name
    assert report["driver_libraries"] == []
    cache = host.run("ldconfig -p").stdout
    for soname in ("libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"):
        assert soname not in cache, soname
    # cuDNN and NCCL from the wheels are registered with the loader, not only on LD_LIBRARY_PATH.
    assert re.search(r"libcudnn\.so\.\d+ .*=> .*/nvidia/cudnn/lib/", cache)
    assert re.search(r"libnccl\.so\.2 .*=> .*/nvidia/nccl/lib/", cache)


def test_python_packages_are_the_locked_ones(host, report):
    """Every installed distribution of the lock is at the locked version (pip, the
    installer, excepted: a user may upgrade it, and the pins leave it out)."""
    py = report["python"].rsplit(".", 1)[0]
    lock = host.file(contract.lock_file(py)).content_string
    pinned = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", lock, re.M))
    pinned.pop("pip", None)
    assert pinned, "empty lock"
    for name, version in pinned.items():
        key = re.sub(r"[-_.]+", "-", name).lower()
        installed = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in report["packages"].items()}
        assert installed.get(key) == version, (name, installed.get(key), version)


def test_trains_a_small_model_with_falling_loss(python):
    out = python(
        "import numpy as np, tensorflow as tf\n"
        "tf.random.set_seed(0); np.random.seed(0)\n"
        "x = np.random.rand(256, 8).astype('float32'); y = (x.sum(1, keepdims=True) > 4).astype('float32')\n"
        "m = tf.keras.Sequential([tf.keras.layers.Dense(16, activation='relu', input_shape=(8,)),"
        " tf.keras.layers.Dense(1, activation='sigmoid')])\n"
        "m.compile(optimizer=tf.keras.optimizers.Adam(0.05), loss='binary_crossentropy')\n"
        "h = m.fit(x, y, epochs=8, batch_size=32, verbose=0).history['loss']\n"
        "print(h[0], h[-1])"
    )
    assert out.rc == 0, out.stderr
    first, last = map(float, out.stdout.split()[-2:])
    assert last < first * 0.8, (first, last)


def test_jit_compile_runs_when_xla_is_on(python, labels):
    if labels[Label.XLA] != "1":
        pytest.skip("TF_ENABLE_XLA=0 in this image")
    out = python(
        "import tensorflow as tf\n"
        "f = tf.function(lambda x: tf.nn.relu(x @ x) + 1.0, jit_compile=True)\n"
        "x = tf.ones((4, 4))\n"
        "assert 'HloModule' in f.experimental_get_compiler_ir(x)(stage='hlo')\n"
        "print(float(tf.reduce_sum(f(x))))"
    )
    assert out.rc == 0, out.stderr
    assert float(out.stdout.split()[-1]) == 4 * 4 * 5.0


def test_xla_finds_its_gpu_toolchain(report, labels, host):
    """XLA's GPU compiler needs ptxas and libdevice: where the image's report found them
    (searched as XLA searches), they are there and ptxas runs; no GPU is needed for that."""
    if labels[Label.XLA] != "1" or not report["tensorflow"]["build_info"].get("is_cuda_build"):
        pytest.skip("XLA is off or TensorFlow is a CPU build: no GPU toolchain is needed")
    xla = report["xla"]
    assert xla["ptxas"] and xla["libdevice"], xla
    assert host.file(xla["libdevice"]).is_file
    out = host.run(f"{xla['ptxas']} --version")
    assert out.rc == 0 and xla["ptxas_version"] and xla["ptxas_version"] in out.stdout, out.stdout
    assert xla["cpu_jit_compile"]["ok"], xla["cpu_jit_compile"]


def test_file_systems_are_probed(report, labels):
    fs = report["filesystems"]
    assert set(fs) >= {"gs", "hdfs"}
    # No Hadoop client ships in the image: hdfs:// is reported unusable, and builds refuse --hdfs.
    assert fs["hdfs"]["available"] is False and labels[Label.HDFS] == "0"
    assert ("gs" in labels[Label.FILESYSTEMS].split(",")) == fs["gs"]["available"]


# --- the extension ----------------------------------------------------------------------------
def test_extension_unit_tests_pass_in_the_image(host):
    """The extension's ops against TensorFlow's own, in graphs, gradients, XLA when on."""
    out = host.run(
        "cd / && TF_CPP_MIN_LOG_LEVEL=2 python3 -m unittest discover "
        f"-s {InImage.SOURCE}/tests -t {InImage.SOURCE} 2>&1"
    )
    assert out.rc == 0, out.stdout
    assert re.search(r"^OK", out.stdout, re.M)


def test_extension_binary_carries_sass_for_each_capability_and_ptx_for_the_newest(report, labels, host):
    lib = report["extension"]["library"]
    want = digits(requested(labels))
    elf = host.run(f"cuobjdump --list-elf {lib}")
    assert elf.rc == 0, elf.stderr
    assert sorted(set(re.findall(r"\.sm_(\d+)\.cubin", elf.stdout)), key=int) == want
    # the PTX is the newest capability nvcc compiles: the newer ones (Blackwell on CUDA 12.4)
    # are assembled from it by the wheel's ptxas
    nvcc = re.search(r"release (\d+\.\d+)", host.run("nvcc --version").stdout)
    assert nvcc, "no nvcc --version in a devel image"
    newest = int(cuda_arch.supported_archs(nvcc.group(1))[-1].digits)
    ptx = host.run(f"cuobjdump --list-ptx {lib}")
    assert set(re.findall(r"\.sm_(\d+)\.ptx", ptx.stdout)) == {
        max((d for d in want if int(d) <= newest), key=int, default=str(newest))
    }


def test_extension_xla_kernels_follow_the_toggle(report, labels):
    assert report["extension"]["is_xla_build"] == (labels[Label.XLA] == "1")


# --- GPU coverage ---------------------------------------------------------------------------
def test_every_requested_capability_is_served_by_every_cuda_binary(report, labels):
    """Every binary the build checks (TensorFlow's, the extension's, Horovod's) runs on every
    requested capability; the libraries the release pins (cuDNN, NCCL, DALI...) are listed
    with them, their gaps are the build's warnings (readback.CHECKED_COMPONENTS)."""
    assert set(report["coverage"]) == set(requested(labels))
    for arch, row in report["coverage"].items():
        for path, cell in row.items():
            if cell["component"] in readback.CHECKED_COMPONENTS:
                assert cell["kind"] in ("sass", "ptx"), (arch, path, cell)
    components = {b["component"] for b in report["cuda_binaries"]}
    assert {"tensorflow", "extension"} <= components
    if report["tensorflow"]["build_info"].get("is_cuda_build"):  # the libraries it loads are read too
        assert {"cudnn", "cublas"} <= components, components
        assert "nccl" in components or not (report["libraries"].get("nccl") or {}).get("loaded"), components


# --- build script, entrypoint, examples -------------------------------------------------------
def test_nvbuild_contract(host):
    assert host.run(f"{InImage.NVBUILD} --help").rc == 0
    bad = host.run(f"{InImage.NVBUILD} --frobnicate")
    assert bad.rc == 2 and "UNKNOWN OPTION --frobnicate" in bad.stderr
    local = host.run(f"{InImage.NVBUILD} --sm local --configonly")
    if host.exists("nvidia-smi"):
        pytest.skip("a GPU tool is present; --sm local would probe it")
    assert local.rc != 0 and "no GPU is visible" in local.stderr


def test_banner_with_shared_memory_note(run_image, labels, report, release_data):
    rel, variant = release_data
    out = run_image()
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "== TensorFlow ==" in text
    assert banner_release_line(rel, f"{rel.name}-{variant.short}", labels[Label.BUILD_ID]) in text
    assert f"TensorFlow Version {report['version']}" in text
    assert "The TensorFlow Authors" in text
    if not gpu_visible():
        assert "WARNING: The NVIDIA Driver was not detected" in text
    assert "NOTE: The SHMEM allocation limit is set to the default of 64MB" in text
    assert "--shm-size=1g --ulimit memlock=-1 --ulimit stack=67108864" in text


def test_banner_and_labels_name_the_catalogs_vendor(run_image, labels, release_data):
    """The image names its maker as the catalog's vendor says; NVIDIA's authorship (NGC's
    release line, its copyright and modification notices, an inherited `maintainer`) only
    on an image whose vendor is NVIDIA. NVIDIA_* variables and com.nvidia.* labels are NGC's
    interfaces and stay."""
    rel, _ = release_data
    vendor = rel.vendor
    text = run_image().stdout
    assert labels.get(LABEL_VENDOR) == vendor.name
    assert labels.get(LABEL_MAINTAINER) == (vendor.maintainer or vendor.name)
    for key, value in ((LABEL_AUTHORS, vendor.maintainer), (LABEL_URL, vendor.url)):
        if value:
            assert labels.get(key) == value, key
    assert ("Container image Copyright (c)" in text) == bool(vendor.copyright_holder)
    if vendor.copyright_holder:
        line = r"Container image Copyright \(c\) [0-9]{4}, " + re.escape(vendor.copyright_holder) + r"\.  All rights"
        assert re.search(line, text), text
    assert ("Various files include modifications (c) NVIDIA" in text) == vendor.is_nvidia
    if not vendor.is_nvidia:
        assert "NVIDIA Release" not in text and "NVIDIA CORPORATION" not in text.upper(), text
        claims = {k: v for k, v in labels.items() if "NVIDIA CORPORATION" in v.upper()}
        assert not claims, claims


def test_no_shared_memory_note_with_enough_shm(run_image):
    out = run_image("--shm-size=1g")
    assert out.returncode == 0
    assert "SHMEM" not in out.stdout


def test_entrypoint_runs_the_command_and_keeps_its_exit_code(run_image):
    out = run_image(cmd=("bash", "-c", "echo hello-from-cmd; exit 7"))
    assert out.returncode == 7 and out.stdout.rstrip().endswith("hello-from-cmd")


CNN = f"cd {InImage.NVIDIA_EXAMPLES}/cnn && TF_CPP_MIN_LOG_LEVEL=2 timeout 600 python3 cnn.py"


@pytest.mark.parametrize(
    "flags",
    [
        "--model small_cnn --batch_size 16 --num_iter 6 --warmup 2",
        "--model resnet50 --image_size 64 --batch_size 4 --num_iter 3 --warmup 1",
        "--model small_cnn --batch_size 8 --num_iter 3 --warmup 1 --precision fp16",
    ],
)
def test_cnn_example_trains(host, flags):
    out = host.run(f"{CNN} {flags} --display_every 1")
    assert out.rc == 0, out.stderr[-3000:]
    assert re.search(r"^total images/sec: \d+(\.\d+)?$", out.stdout, re.M), out.stdout
    assert re.search(r"^final loss: [\d.]+", out.stdout, re.M), out.stdout


def test_cnn_example_with_xla(host, labels):
    out = host.run(f"{CNN} --model small_cnn --batch_size 8 --num_iter 3 --warmup 1 --xla")
    assert out.rc == 0, out.stderr[-3000:]
    assert re.search(r"^total images/sec: ", out.stdout, re.M)


def test_tftrt_example_says_why_it_skips(host, report):
    out = host.run(f"cd {InImage.NVIDIA_EXAMPLES}/tftrt && TF_CPP_MIN_LOG_LEVEL=2 timeout 600 python3 *.py 2>&1")
    if gpu_visible() and report["tf_trt_available"]:
        assert out.rc == 0 and "skipped" not in out.stdout
    else:
        assert out.rc == 0, out.stdout[-3000:]
        assert re.search(r"^skipped: .+", out.stdout, re.M), out.stdout


@pytest.mark.gpu
def test_tensorflow_sees_the_gpu_and_the_extension_runs_on_it(image):
    import subprocess

    code = (
        "import tensorflow as tf, tfext; assert tf.config.list_physical_devices('GPU'); "
        "x = tf.random.normal((64, 64)); b = tf.random.normal((64,))\n"
        "with tf.device('/GPU:0'): y = tfext.bias_relu(x, b)\n"
        "tf.debugging.assert_near(y, tf.nn.relu(tf.nn.bias_add(x, b))); print('ok')"
    )
    out = subprocess.run(
        ["docker", "run", "--rm", "--gpus", "all", image, "python3", "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_image_report_is_valid_json_with_packages(report):
    assert report["packages"].get("tensorflow") == report["version"]
    json.dumps(report)
