"""`builder build` and friends on a real engine: the 21.08 tf2 image, its conformance,
failures that move no tag, interrupts, toggled builds and in-image rebuilds."""

import json
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from builder import catalog

from .conftest import (
    BUILD_ID,
    REPO,
    build_containers,
    builder,
    component_row,
    coverage_cells,
    coverage_verdicts,
    docker,
    docker_bridge_address,
    free_port,
    image_id,
    labels,
)

ROOT = Path(__file__).resolve().parents[2]


def test_offline_base_is_a_no_op_the_second_time(offline_base):
    before = image_id(offline_base)
    out = builder("base", "--release", "21.08")
    assert out.returncode == 0 and out.stdout.strip() == offline_base
    assert "nothing to do" in out.stderr and "step" not in out.stderr
    assert image_id(offline_base) == before


def test_offline_base_layout(offline_base):
    out = docker(
        "run",
        "--rm",
        offline_base,
        "bash",
        "-c",
        "command -v nvcc cuobjdump && ls -d /usr/local/cuda/bin /usr/local/cuda/include /usr/local/cuda/lib64 "
        "&& python3 --version && printenv CUDA_VERSION NVIDIA_VISIBLE_DEVICES NVIDIA_DRIVER_CAPABILITIES "
        "NVIDIA_REQUIRE_CUDA",
    )
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.startswith("/usr/local/cuda/bin/nvcc\n/usr/local/cuda/bin/cuobjdump\n")
        and "Python 3.9" in out.stdout
    )
    assert out.stdout.split()[-4:] == ["11.2", "all", "compute,utility,video", "cuda>=11.2"]


def test_offline_base_leaves_out_cuda_static_libraries_but_nvcc_links(offline_base):
    """dpkg leaves CUDA's static libraries out (1.5 GB); nvcc's default link still works."""
    out = docker(
        "run",
        "--rm",
        offline_base,
        "bash",
        "-c",
        "cd /tmp && ls /usr/lib/x86_64-linux-gnu/ | grep -E '_static.*\\.a$'; "
        "printf '__global__ void k(){}\\nint main(){k<<<1,1>>>(); return 0;}\\n' > t.cu "
        "&& nvcc -o t t.cu && echo linked && apt-get check >/dev/null && echo apt-consistent",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["libcudart_static.a", "linked", "apt-consistent"], out.stdout


def test_offline_base_has_no_driver_libraries_and_consistent_packages(offline_base):
    """Debian's toolkit depends on the driver's libraries; a placeholder package stands in
    for them, so the host's (injected by the NVIDIA container toolkit) are the only ones."""
    out = docker(
        "run",
        "--rm",
        offline_base,
        "bash",
        "-c",
        "ldconfig -p | grep -E 'libcuda\\.so\\.1|libnvidia-ml\\.so\\.1|libnvidia-ptxjitcompiler' ; "
        "find / -xdev \\( -name 'libcuda.so.*' -o -name 'libnvidia-ml.so.*' \\) -not -path '*/stubs/*'; "
        "dpkg-query -W -f '${Package} ${Status}\\n' host-provided-nvidia-driver libcuda1 libnvidia-ml1 2>&1; "
        "apt-get check >/dev/null && echo apt-consistent",
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "host-provided-nvidia-driver install ok installed" in lines
    assert not any("libcuda.so" in line or "libnvidia-ml.so" in line for line in lines), lines
    assert not any(line.startswith(("libcuda1 install", "libnvidia-ml1 install")) for line in lines), lines
    assert lines[-1] == "apt-consistent"


def test_release_image_passes_conformance(release_image):
    out = builder("test", release_image)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert re.search(r"\d+ passed", out.stdout)


def test_the_release_image_was_built_by_buildkit_with_a_step_log(release_image, cache_dir):
    """builder build's default backend is BuildKit (doctor says so): the image's own history
    names BuildKit's Dockerfile frontend for the release's steps, and the build log marks
    where each numbered step started."""
    doctor = builder("doctor").stdout
    assert re.search(r"^ok\s+build backend\s+BuildKit through docker buildx$", doctor, re.M), doctor
    comments = docker("history", "--no-trunc", "--format", "{{.Comment}}|{{.CreatedBy}}", release_image).stdout
    ours = [line for line in comments.splitlines() if "nvbuild.sh" in line]
    assert ours and all(line.startswith("buildkit.dockerfile.v0|") for line in ours), ours
    log = (cache_dir / "logs" / f"21.08-tf2-py3-{BUILD_ID}.log").read_text()
    assert re.search(r"^#builder-step \d+/\d+ at [\d.]+s: RUN \./nvbuild\.sh --only horovod", log, re.M)
    assert "nvbuild.sh: horovod compile phase" in log  # the steps' own output is there too
    # No compile or pip cache in any layer (ccache's mount stays in BuildKit's cache).
    held = docker(
        "run",
        "--rm",
        "--entrypoint",
        "bash",
        release_image,
        "-c",
        "find /var/cache/nvbuild /root/.cache/pip /tmp/ccache -mindepth 1 2>/dev/null; true",
    )
    assert held.returncode == 0 and held.stdout.strip() == "", held.stdout[:2000]


def test_release_image_tags_and_labels(release_image):
    assert image_id(release_image) == image_id(f"{release_image}-{BUILD_ID}")
    lab = labels(release_image)
    assert lab["dev.tfbuilder.release"] == "21.08" and lab["dev.tfbuilder.variant"] == "tf2-py3"
    assert lab["dev.tfbuilder.base"] == "offline" and lab["dev.tfbuilder.base-image"].startswith(
        "local/cuda-base:bullseye"
    )
    assert lab["com.nvidia.build.id"] == BUILD_ID
    # Read back from the image, not copied from the request.
    assert lab["dev.tfbuilder.framework-version"] == "2.5.0"
    assert lab["dev.tfbuilder.cuda"] == "11.2" and lab["dev.tfbuilder.cudnn"].startswith("8.")
    assert lab["dev.tfbuilder.tf-trt"] == "unavailable"
    assert lab["dev.tfbuilder.horovod"].startswith("0.22.1 ")
    assert "TensorFlow 2.5.0 (upstream wheel)" in lab["org.opencontainers.image.description"]


def test_real_tensorflow_imports_at_the_catalogs_version(release_image):
    """Done-when: `docker run --rm IMAGE python -c 'import tensorflow as tf; print(tf.__version__)'`."""
    out = docker("run", "--rm", release_image, "python", "-c", "import tensorflow as tf; print(tf.__version__)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "2.5.0"


def test_banner_and_shared_memory_note(release_image):
    plain = docker("run", "--rm", release_image)
    assert plain.returncode == 0
    # the catalog's vendor, not NVIDIA, is the image's maker (no NVIDIA copyright by default)
    assert (
        "tf-image-builder release 21.08-tf2 (build itest), built from the NGC TensorFlow 21.08 recipe" in plain.stdout
    )
    assert "NVIDIA Release" not in plain.stdout and "NVIDIA CORPORATION" not in plain.stdout
    assert "Copyright 2017-2021 The TensorFlow Authors." in plain.stdout
    assert "TensorFlow Version 2.5.0" in plain.stdout
    assert "NOTE: The SHMEM allocation limit is set to the default of 64MB" in plain.stdout
    big = docker("run", "--rm", "--shm-size=1g", release_image, "true")
    assert big.returncode == 0 and "SHMEM" not in big.stdout and "== TensorFlow ==" in big.stdout


def test_inspect_reports_what_the_image_holds(release_image):
    out = builder("inspect", release_image, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["release"] == "21.08" and report["cuda_compute_capabilities"] == "5.2,6.0,6.1,7.0,7.5,8.0,8.6"
    assert report["framework"] == "TensorFlow 2.5.0" and report["python"].startswith("3.9.")
    assert report["versions"]["cuda"] == "11.2" and report["components"]["horovod"]["version"] == "0.22.1"
    assert report["versions"]["cudnn"].startswith("8.") and report["versions"]["nccl"].startswith("2.")
    assert all(lib["loaded"] for name, lib in report["libraries"].items() if name != "tensorrt")
    assert report["libraries"]["tensorrt"]["loaded"] is False and report["tf_trt"] == "unavailable"
    assert report["driver_libraries"] == []
    assert report["tensorflow_build_info"]["cuda_compute_capabilities"][-1] == "compute_80"
    # the image's capabilities and the fleet's (up to Blackwell's 10.0 and 12.0)
    assert set(report["coverage"]) == {"5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"}
    components = {b["component"] for b in report["cuda_binaries"]}
    assert {"tensorflow", "extension", "horovod", "cudnn", "cublas", "nccl", "dali"} <= components
    assert report["coverage_verdicts"]["8.6"]["verdict"] == "sass"
    # a component (builder/components/nsight): what its tools say, and the packages the catalog pins
    pinned = catalog.load().get("21.08").components["nsight"]
    nsight = report["components"]["nsight"]
    assert nsight["nsys"]["package_version"] == pinned.systems and nsight["nsys"]["version"] == "2020.4.3.7"
    assert nsight["ncu"]["package_version"] == pinned.compute and nsight["ncu"]["version"].startswith("2020.3.1")
    assert report["labels"]["dev.tfbuilder.nsight"] == f"ncu={nsight['ncu']['version']} nsys=2020.4.3.7"
    # DALI (read back by its own report script) and TensorBoard (by its distribution's metadata)
    dali, tensorboard = report["components"]["dali"], report["components"]["tensorboard"]
    assert (dali["version"], dali["plugin"]) == ("1.34.0", "1.34.0"), dali
    assert tensorboard == {"tensorboard": {"version": "2.11.2"}}
    assert report["labels"]["dev.tfbuilder.dali"] == "1.34.0 (TensorFlow plugin 1.34.0)"
    assert report["labels"]["dev.tfbuilder.tensorboard"] == "tensorboard=2.11.2"
    # JupyterLab of the era (3.0, on jupyter-server 1) under TensorFlow 2.5's pins
    assert report["components"]["jupyter"] == {"jupyterlab": {"version": "3.0.16"}}
    assert report["labels"]["dev.tfbuilder.jupyter"] == "jupyterlab=3.0.16"
    text = builder("inspect", release_image).stdout
    assert re.search(r"^nsys\s+2020\.4\.3\.7$", text, re.M), text
    assert re.search(r"^dali_tf_plugin\s+1\.34\.0$", text, re.M), text
    assert re.search(r"^tensorboard\s+2\.11\.2$", text, re.M), text


def test_inspect_coverage_table(release_image):
    """Every CUDA binary of the image, by component (TensorFlow's, ours, NVIDIA's libraries,
    DALI's), per capability, then a verdict per capability."""
    out = builder("inspect", release_image, "--coverage", "--cuda-cc", "9.0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("COMPONENT / BINARY")
    cells = coverage_cells(out.stdout)
    tf, ext, hvd = (component_row(cells, n) for n in ("TensorFlow", "tfext", "Horovod"))
    assert set(tf) == {"5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"}
    assert cells["_pywrap_tensorflow_internal.so"]["8.6"] == "sm_80"  # TensorFlow's wheel: sm_80 SASS runs on 8.6
    assert ext["8.6"] == hvd["8.6"] == "sm_86"  # the extension and Horovod: native code
    for gpu in ("9.0", "10.0", "12.0"):  # Hopper and Blackwell: PTX JIT, from each binary's newest
        assert tf[gpu].startswith("compute_80") and ext[gpu] == hvd[gpu] == "compute_86", (tf, ext)
    for name in ("cuDNN", "cuBLAS", "NCCL"):  # NVIDIA's libraries have rows of their own
        assert component_row(cells, name)["8.6"].startswith("sm_"), name
    assert component_row(cells, "NCCL")["12.0"] == "none"  # NCCL 2.13 (CUDA 11): SASS up to sm_80, no PTX
    assert "libcudnn_cnn_infer.so.8" in cells
    verdicts = coverage_verdicts(out.stdout)
    assert verdicts["8.6"].startswith("runs natively") and verdicts["12.0"].startswith("cannot run: NCCL")


def test_failed_build_keeps_the_previous_image_and_shows_the_failing_step(release_image, tmp_path, compile_cache):
    """A compile error put into the extension fails in nvbuild.sh's compile phase with the
    compiler's message; the tag still names the image it named before."""
    broken = tmp_path / "src"
    shutil.copytree(ROOT / "framework-src", broken, ignore=shutil.ignore_patterns("build", "__pycache__"))
    kernel = sorted((broken / "csrc").rglob("*.cc"))[0]
    kernel.write_text(kernel.read_text() + "\n#error broken on purpose\n")
    before = image_id(release_image)
    out = builder(
        "build",
        "--no-sbom",
        "--release",
        "21.08",
        "--variant",
        "tf2-py3",
        "--repo",
        REPO,
        "--build-id",
        "broken",
        "--framework-src",
        str(broken),
        "--compile-cache",
        compile_cache,
    )
    assert out.returncode == 1
    assert "failing step: step" in out.stderr and "RUN ./nvbuild.sh" in out.stderr
    assert "nvbuild.sh: compile phase failed" in out.stderr
    assert kernel.name in out.stderr and "broken on purpose" in out.stderr  # the compiler's own message
    assert image_id(release_image) == before
    assert image_id(f"{REPO}:21.08-tf2-py3-broken") is None


def test_toggled_build_changes_binaries_and_build_info(release_image, scratch_tag, compile_cache):
    out = builder(
        "build",
        "--no-sbom",
        "--release",
        "21.08",
        "--cuda-cc",
        "7.0,8.0",
        "--no-xla",
        "--gcp",
        "--without",  # a component left out in the same build: its step is skipped, the rest cached
        "nsight",
        "--tag",
        scratch_tag,
        "--compile-cache",
        compile_cache,
        "-q",
    )
    assert out.returncode == 0, out.stderr
    test = builder("test", scratch_tag)
    assert test.returncode == 0, test.stdout[-3000:]
    report = json.loads(builder("inspect", scratch_tag, "--json").stdout)
    # the component left out is not there; the others are
    assert set(report["components"]) == {"dali", "horovod", "jupyter", "tensorboard"}
    assert report["without"] == ["nsight"]
    assert report["labels"]["dev.tfbuilder.nsight"] == ""
    assert docker("run", "--rm", "--entrypoint", "bash", scratch_tag, "-c", "command -v nsys ncu").returncode != 0
    ext = report["extension_build_info"]
    assert ext["cuda_compute_capabilities"] == ["sm_70", "sm_80", "compute_80"] and ext["is_xla_build"] is False
    assert report["toggles"] == {"xla": False, "gcp": True, "hdfs": False}
    for b in report["cuda_binaries"]:
        if b["component"] in ("extension", "horovod"):
            assert b["sass"] == ["70", "80"] and b["ptx"] == ["80"], b
    assert report["filesystems"]["gs"] is True


def test_nvbuild_rebuilds_inside_the_image(release_image, compile_cache):
    """nvbuild.sh run by hand in a container, with the run's compile cache (the release
    build's CPU units come from it; the sm_86 kernels are new)."""
    out = docker(
        "run",
        "--rm",
        "--network",
        "host",
        "--entrypoint",
        "bash",
        release_image,
        "-c",
        f"cd /opt/tensorflow && ./nvbuild.sh --only extension --sm 8.6 --noclean --cache {compile_cache} >/tmp/log 2>&1 "
        "|| { cat /tmp/log; exit 1; }; grep -c 'horovod' /tmp/log; "
        "cd / && python3 -c 'import tfext; print(tfext.sysconfig.get_build_info()[\"cuda_compute_capabilities\"])' "
        "&& ls /opt/tensorflow/tensorflow-source/build",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "['sm_86', 'compute_86']" in out.stdout
    assert out.stdout.split()[0] == "0"  # --only extension: Horovod untouched


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_moves_no_tag_and_leaves_no_build_container(release_image, sig, code):
    before_id = image_id(release_image)
    before_containers = build_containers()
    # A compile cache nobody serves makes the Horovod step miss the layer cache and compile
    # for minutes: an interrupt lands in a running step without --no-cache, which would
    # redo the toolchain and wheel steps first (the builder removes what such a build made
    # when it is interrupted: tests/unit/test_build_cleanup.py). On docker0's address, as
    # the run's cache: a loopback URL would put the build on the host network, whose steps
    # share no layer with the release image's (70 s and 5 GB more, before the interrupt).
    dead_cache = f"http://{docker_bridge_address()}:{free_port()}/ccache"
    proc = subprocess.Popen(
        [
            "builder",
            "build",
            "--release",
            "21.08",
            "--variant",
            "tf2-py3",
            "--repo",
            REPO,
            "--build-id",
            f"int{code}",
            "--compile-cache",
            dead_cache,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wait until that RUN step is executing, then interrupt.
    deadline = time.monotonic() + 300
    seen = ""
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen += line
        if re.search(r"step \d+/\d+: RUN \./nvbuild\.sh --only horovod", line):
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


def test_build_args_reach_the_build_but_never_the_image(release_image, compile_cache, scratch_tag):
    """Docker's habits: `--build-arg HTTP_PROXY=...` (a proxy with a password) goes to the
    build and stays out of the image's history, config and the log; `--progress plain`
    prints the steps; `--json` says what was built; an argument the Dockerfile does not
    declare is refused in one line, building nothing."""
    secret = f"s3cret{uuid.uuid4().hex[:8]}"
    common = [
        "build",
        "--release",
        "21.08",
        "--variant",
        "tf2-py3",
        "--repo",
        REPO,
        "--build-id",
        BUILD_ID,
        "--compile-cache",
        compile_cache,
        "-t",
        scratch_tag,
        "--no-sbom",
    ]
    out = builder(*common, "--build-arg", f"HTTP_PROXY=http://u:{secret}@127.0.0.1:9", "--progress", "plain", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)  # JSON alone on stdout, the progress on stderr
    assert [i["refs"] for i in doc["images"]] == [[scratch_tag]] and doc["base"]["kind"] == "offline"
    assert re.search(r"^21\.08/tf2-py3 \+\d\d:\d\d step 1/\d+: FROM ", out.stderr, re.M), out.stderr[:2000]
    assert secret not in out.stderr
    assert secret not in docker("history", "--no-trunc", scratch_tag).stdout
    assert secret not in docker("image", "inspect", scratch_tag).stdout
    before = image_id(scratch_tag)
    refused = builder(*common, "--build-arg", "NOT_DECLARED=1")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "declares no such build argument" in refused.stderr
    assert image_id(scratch_tag) == before


def test_bad_inputs_change_nothing(release_image):
    before = image_id(release_image)
    for args, text in (
        (["--cuda-cc", "9.9"], "9.9 is not a GPU architecture"),
        (["--base", "no/such-image:1", "-t", "itest/custom:1"], "does not exist locally and cannot be pulled"),
        (["--base", "no/such-image:1"], "a custom base makes a different image"),
        (["--framework-src", "/nonexistent"], "is not a directory"),
        (["--hdfs"], "needs libhdfs.so from a Hadoop client"),
        (["--variant", "tf1-py3"], "TensorFlow 1.15.5 has no wheel for Python"),
    ):
        out = builder("build", "--no-sbom", "--release", "21.08", "--repo", REPO, *args)
        assert out.returncode == 2 and text in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    assert image_id(release_image) == before


def test_dry_run_builds_nothing(offline_base):
    out = builder("build", "--no-sbom", "--release", "21.08", "--all", "--repo", "itest/dry", "--dry-run")
    assert out.returncode == 0, out.stderr
    plans = [json.loads(line) for line in out.stdout.splitlines()]
    assert [p["variant"] for p in plans] == ["tf2-py3"]
    assert all(p["base"] == offline_base for p in plans)
    assert "(--base auto: offline base from Debian bullseye" in out.stderr  # the same base on every machine
    assert "skipped tf1-py3: " in out.stderr
    assert image_id("itest/dry:21.08-tf2-py3") is None
