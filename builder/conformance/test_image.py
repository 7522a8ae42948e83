"""Conformance of a release image: layout, environment, banner, labels, and the
framework's own report of how it was built."""
import json
import re

import pytest

from builder.conformance.plugin import gpu_visible
from builder.render import LABEL_PREFIX as LABEL

SECTION_6 = ("TF_CUDA_COMPUTE_CAPABILITIES", "TF_ENABLE_XLA", "TF_NEED_GCP", "TF_NEED_HDFS")


def test_layout(host):
    nvbuild = host.file("/opt/tensorflow/nvbuild.sh")
    assert nvbuild.is_file and nvbuild.mode & 0o111
    assert host.file("/opt/tensorflow/nvbuildopts").is_file
    assert host.file("/opt/tensorflow/cuda_arch.py").is_file
    assert host.file("/opt/tensorflow/tensorflow-source").is_directory
    assert host.file("/opt/tensorflow/build-info.json").is_file
    for d in ("/workspace/nvidia-examples", "/workspace/docker-examples"):
        assert host.file(d).is_directory
    for f in ("Dockerfile.customtensorflow", "Dockerfile.addpackages", "README.md"):
        assert host.file(f"/workspace/docker-examples/{f}").is_file
    assert host.file("/opt/nvidia/nvidia_entrypoint.sh").mode & 0o111


def test_build_state_was_cleaned(host):
    """nvbuild.sh removes objects and wheels unless --noclean: they are not in the image."""
    assert not host.file("/opt/tensorflow/tensorflow-source/build").exists
    assert not host.file("/tmp/pip").exists


def test_every_env_default_has_the_release_value(release_data, labels, image_env, host):
    rel, variant = release_data
    overridden = set(filter(None, labels.get(f"{LABEL}.env-overrides", "").split(",")))
    expected = {**rel.env, **variant.env, "NVIDIA_TENSORFLOW_VERSION": f"{rel.name}-{variant.short}"}
    for name, value in expected.items():
        if name in overridden:
            continue
        assert image_env.get(name) == value, name
        assert host.run(f"printenv {name}").stdout.strip() == value, name


def test_build_parameters_match_labels(labels, image_env):
    assert image_env["TF_CUDA_COMPUTE_CAPABILITIES"] == labels[f"{LABEL}.cuda-compute-capabilities"]
    assert image_env["TF_ENABLE_XLA"] == labels[f"{LABEL}.xla"]
    assert image_env["TF_NEED_GCP"] == labels[f"{LABEL}.gcp"]
    assert image_env["TF_NEED_HDFS"] == labels[f"{LABEL}.hdfs"]


def test_labels_record_the_build(labels, image_env, release_data):
    rel, variant = release_data
    assert labels["org.opencontainers.image.version"] == variant.tag
    assert labels[f"{LABEL}.framework-version"] == variant.framework_version
    assert labels["com.nvidia.build.id"] == image_env["NVIDIA_BUILD_ID"] != ""
    assert labels["org.opencontainers.image.base.name"] == labels[f"{LABEL}.base-image"] != ""
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", labels["org.opencontainers.image.created"])


def test_framework_build_info_matches_labels(build_info, labels, host):
    archs = labels[f"{LABEL}.cuda-compute-capabilities"].split(",")
    digits = [a.replace(".", "") for a in archs]
    assert build_info["cuda_compute_capabilities"] == [f"sm_{d}" for d in digits] + [f"compute_{digits[-1]}"]
    assert build_info["is_xla_build"] == (labels[f"{LABEL}.xla"] == "1")
    assert build_info["is_gcp_build"] == (labels[f"{LABEL}.gcp"] == "1")
    assert build_info["is_hdfs_build"] == (labels[f"{LABEL}.hdfs"] == "1")
    recorded = json.loads(host.file("/opt/tensorflow/build-info.json").content_string)
    assert recorded == build_info


def test_cuda_library_holds_sass_for_each_arch_and_ptx_for_the_newest(build_info, labels, host):
    lib = build_info["cuda_library"]
    assert lib, "not a CUDA build"
    digits = sorted({a.replace(".", "") for a in labels[f"{LABEL}.cuda-compute-capabilities"].split(",")}, key=int)
    elf = host.run(f"cuobjdump --list-elf {lib}")
    assert elf.rc == 0, elf.stderr
    assert sorted(set(re.findall(r"\.sm_(\d+)\.cubin", elf.stdout)), key=int) == digits
    ptx = host.run(f"cuobjdump --list-ptx {lib}")
    assert set(re.findall(r"\.sm_(\d+)\.ptx", ptx.stdout)) == {digits[-1]}


def test_file_systems_follow_the_toggles(host, labels):
    out = host.run("cd / && python3 -c 'import json, tfref; print(json.dumps(tfref.io.available_schemes()))'")
    schemes = json.loads(out.stdout)
    assert ("gs" in schemes) == (labels[f"{LABEL}.gcp"] == "1")
    assert ("hdfs" in schemes) == (labels[f"{LABEL}.hdfs"] == "1")
    xla = host.run("cd / && python3 -c 'import tfref.xla'")
    assert (xla.rc == 0) == (labels[f"{LABEL}.xla"] == "1")


def test_framework_unit_tests_pass_in_the_image(host):
    out = host.run("cd / && python3 -m unittest discover -s /opt/tensorflow/tensorflow-source/tests "
                   "-t /opt/tensorflow/tensorflow-source 2>&1")
    assert out.rc == 0, out.stdout
    assert re.search(r"^OK", out.stdout, re.M)


def test_nvbuild_contract(host):
    assert host.run("/opt/tensorflow/nvbuild.sh --help").rc == 0
    bad = host.run("/opt/tensorflow/nvbuild.sh --frobnicate")
    assert bad.rc == 2 and "UNKNOWN OPTION --frobnicate" in bad.stderr
    local = host.run("/opt/tensorflow/nvbuild.sh --sm local --configonly")
    if host.exists("nvidia-smi"):
        pytest.skip("a GPU tool is present; --sm local would probe it")
    assert local.rc != 0 and "no GPU is visible" in local.stderr


def test_banner_with_shared_memory_note(run_image, labels, build_info, release_data):
    rel, variant = release_data
    out = run_image()
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "== TensorFlow ==" in text
    assert f"NVIDIA Release {rel.name}-{variant.short} (build {labels['com.nvidia.build.id']})" in text
    assert f"{build_info['framework_name']} Version {build_info['version']}" in text
    assert "NVIDIA CORPORATION" in text and "The TensorFlow Authors" in text
    if not gpu_visible():
        assert "WARNING: The NVIDIA Driver was not detected" in text
    assert "NOTE: The SHMEM allocation limit is set to the default of 64MB" in text
    assert "--shm-size=1g --ulimit memlock=-1 --ulimit stack=67108864" in text


def test_no_shared_memory_note_with_enough_shm(run_image):
    out = run_image("--shm-size=1g")
    assert out.returncode == 0
    assert "SHMEM" not in out.stdout


def test_entrypoint_runs_the_command_and_keeps_its_exit_code(run_image):
    out = run_image(cmd=("bash", "-c", "echo hello-from-cmd; exit 7"))
    assert out.returncode == 7 and out.stdout.rstrip().endswith("hello-from-cmd")


@pytest.mark.gpu
def test_kernels_run_on_the_gpu(image):
    import subprocess

    out = subprocess.run(["docker", "run", "--rm", "--gpus", "all", image, "python3", "-c",
                          "import numpy as np, tfref; a = np.ones((64, 64)); "
                          "assert np.allclose(tfref.matmul(a, a, device='gpu'), a @ a); print('ok')"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_cnn_benchmark_example_runs(host, labels):
    if not host.file("/workspace/nvidia-examples/cnn/cnn_benchmark.py").exists:
        pytest.skip("this framework ships no cnn example")
    flags = "--batch_size 4 --num_batches 3 --display_every 1 --device cpu"
    for extra in ("", " --precision fp16") + ((" --xla",) if labels[f"{LABEL}.xla"] == "1" else ()):
        out = host.run(f"cd /workspace/nvidia-examples/cnn && python3 cnn_benchmark.py {flags}{extra}")
        assert out.rc == 0, out.stderr
        assert re.search(r"^total images/sec: \d+\.\d+$", out.stdout, re.M), out.stdout
    if labels[f"{LABEL}.xla"] == "0":
        out = host.run(f"cd /workspace/nvidia-examples/cnn && python3 cnn_benchmark.py {flags} --xla")
        assert out.rc == 2 and "TF_ENABLE_XLA=1" in out.stderr
