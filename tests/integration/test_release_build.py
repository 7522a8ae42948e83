"""`builder build` and friends on a real engine: the 21.08 tf2 image, its conformance,
failures that move no tag, interrupts, toggled builds and in-image rebuilds."""
import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import BUILD_ID, REPO, build_containers, builder, docker, image_id, labels

ROOT = Path(__file__).resolve().parents[2]


def test_offline_base_is_a_no_op_the_second_time(offline_base):
    before = image_id(offline_base)
    out = builder("base", "--release", "21.08")
    assert out.returncode == 0 and out.stdout.strip() == offline_base
    assert "nothing to do" in out.stderr and "step" not in out.stderr
    assert image_id(offline_base) == before


def test_offline_base_layout(offline_base):
    out = docker("run", "--rm", offline_base, "bash", "-c",
                 "command -v nvcc cuobjdump && ls -d /usr/local/cuda/bin /usr/local/cuda/include /usr/local/cuda/lib64 "
                 "&& python3 --version && printenv CUDA_VERSION NVIDIA_VISIBLE_DEVICES NVIDIA_DRIVER_CAPABILITIES "
                 "NVIDIA_REQUIRE_CUDA")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("/usr/local/cuda/bin/nvcc\n/usr/local/cuda/bin/cuobjdump\n") and "Python 3.9" in out.stdout
    assert out.stdout.split()[-4:] == ["11.2", "all", "compute,utility,video", "cuda>=11.2"]


def test_release_image_passes_conformance(release_image):
    out = builder("test", release_image)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert re.search(r"\d+ passed", out.stdout)


def test_release_image_tags_and_labels(release_image):
    assert image_id(release_image) == image_id(f"{release_image}-{BUILD_ID}")
    lab = labels(release_image)
    assert lab["dev.tfbuilder.release"] == "21.08" and lab["dev.tfbuilder.variant"] == "tf2-py3"
    assert lab["dev.tfbuilder.base"] == "offline" and lab["dev.tfbuilder.base-image"].startswith("local/cuda-base:bullseye")
    assert lab["com.nvidia.build.id"] == BUILD_ID


def test_banner_and_shared_memory_note(release_image):
    plain = docker("run", "--rm", release_image)
    assert plain.returncode == 0
    assert "NVIDIA Release 21.08-tf2 (build itest)" in plain.stdout
    assert "NOTE: The SHMEM allocation limit is set to the default of 64MB" in plain.stdout
    big = docker("run", "--rm", "--shm-size=1g", release_image, "true")
    assert big.returncode == 0 and "SHMEM" not in big.stdout and "== TensorFlow ==" in big.stdout


def test_inspect_reports_labels_and_the_frameworks_own_build_info(release_image):
    out = builder("inspect", release_image, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["release"] == "21.08" and report["cuda_compute_capabilities"] == "5.2,6.0,6.1,7.0,7.5,8.0,8.6"
    assert report["toggles"] == {"xla": True, "gcp": False, "hdfs": False}
    info = report["framework_build_info"]
    assert info["cuda_compute_capabilities"][-1] == "compute_86" and info["is_xla_build"] is True
    assert report["cuda_library"].endswith("/tfref/lib/libtfref_cuda.so")


def test_failed_build_keeps_the_previous_image_and_shows_the_failing_step(release_image, tmp_path):
    """A syntax error put into the source fails in nvbuild.sh's compile phase with the
    compiler's message; the tag still names the image it named before."""
    broken = tmp_path / "src"
    shutil.copytree(ROOT / "framework-src", broken, ignore=shutil.ignore_patterns("build", "__pycache__"))
    kernel = broken / "csrc/core/softmax.cc"
    kernel.write_text(kernel.read_text().replace("return TFREF_OK;", "return TFREF_OK  /* missing semicolon */"))
    before = image_id(release_image)
    out = builder("build", "--release", "21.08", "--variant", "tf2-py3", "--repo", REPO, "--build-id", "broken",
                  "--framework-src", str(broken))
    assert out.returncode == 1
    assert "failing step: step" in out.stderr and "RUN ./nvbuild.sh" in out.stderr
    assert "nvbuild.sh: compile phase failed" in out.stderr
    assert "softmax.cc" in out.stderr and "error" in out.stderr          # the compiler's own message
    assert image_id(release_image) == before
    assert image_id(f"{REPO}:21.08-tf2-py3-broken") is None


def test_toggled_build_changes_binary_build_info_and_file_systems(offline_base, scratch_tag):
    out = builder("build", "--release", "21.08", "--cuda-cc", "7.0,8.0", "--no-xla", "--gcp", "--hdfs",
                  "--tag", scratch_tag, "-q")
    assert out.returncode == 0, out.stderr
    assert builder("test", scratch_tag).returncode == 0
    probe = docker("run", "--rm", "--entrypoint", "bash", scratch_tag, "-c",
                   "python3 -c 'import json,tfref; i=tfref.sysconfig.get_build_info(); "
                   "print(json.dumps([i[\"cuda_compute_capabilities\"], i[\"is_xla_build\"], i[\"is_gcp_build\"], "
                   "i[\"is_hdfs_build\"], tfref.io.available_schemes()]))' && "
                   "cuobjdump --list-elf $(python3 -c 'import tfref; print(tfref.sysconfig.get_cuda_library())')")
    assert probe.returncode == 0, probe.stderr
    first, rest = probe.stdout.split("\n", 1)
    assert json.loads(first) == [["sm_70", "sm_80", "compute_80"], False, True, True, ["file", "gs", "hdfs"]]
    assert sorted(set(re.findall(r"sm_\d+", rest))) == ["sm_70", "sm_80"]


def test_nvbuild_rebuilds_inside_the_image(release_image):
    out = docker("run", "--rm", release_image, "bash", "-c",
                 "cd /opt/tensorflow && ./nvbuild.sh --sm 8.6 --noclean >/tmp/log 2>&1 || { cat /tmp/log; exit 1; }; "
                 "cd / && python3 -c 'import tfref; print(tfref.sysconfig.get_build_info()[\"cuda_compute_capabilities\"])' "
                 "&& ls /opt/tensorflow/tensorflow-source/build/lib")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "['sm_86', 'compute_86']" in out.stdout
    assert "libtfref_cuda.so" in out.stdout            # --noclean kept the build tree


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_moves_no_tag_and_leaves_no_build_container(release_image, sig, code):
    before_id = image_id(release_image)
    before_containers = build_containers()
    proc = subprocess.Popen(["builder", "build", "--release", "21.08", "--variant", "tf2-py3", "--repo", REPO,
                             "--build-id", f"int{code}", "--no-cache"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait until a RUN step is executing, then interrupt.
    deadline = time.monotonic() + 300
    seen = ""
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen += line
        if re.search(r"step \d+/\d+: RUN", line) and "apt-get" in line:
            time.sleep(3)
            break
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, seen + err
    assert "no tag was moved" in err
    assert image_id(release_image) == before_id
    assert image_id(f"{REPO}:21.08-tf2-py3-int{code}") is None
    time.sleep(2)
    assert build_containers() - before_containers == set()


def test_bad_inputs_change_nothing(release_image):
    before = image_id(release_image)
    for args, text in ((["--cuda-cc", "9.9"], "9.9 is not a GPU architecture"),
                       (["--base", "no/such-image:1"], "does not exist locally and cannot be pulled"),
                       (["--framework-src", "/nonexistent"], "is not a directory")):
        out = builder("build", "--release", "21.08", "--repo", REPO, *args)
        assert out.returncode == 2 and text in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    assert image_id(release_image) == before


def test_dry_run_builds_nothing(offline_base):
    out = builder("build", "--release", "21.08", "--all", "--repo", "itest/dry", "--dry-run")
    assert out.returncode == 0, out.stderr
    plans = [json.loads(line) for line in out.stdout.splitlines()]
    assert [p["variant"] for p in plans] == ["tf1-py3", "tf2-py3"]
    assert all(p["base"] == offline_base for p in plans)
    assert "upstream base nvcr.io/nvidia/cuda:11.4.1-cudnn8-devel-ubuntu20.04 is not present" in out.stderr
    assert image_id("itest/dry:21.08-tf1-py3") is None
