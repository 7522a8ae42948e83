"""The fault battery: interrupts during a push, concurrent builds, an unreachable engine,
conflicting options. (Interrupts during a build, registry faults, secrets and patch
failures have their tests beside the features; docs/RELIABILITY.md lists them all.)"""

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import builder, docker, image_id, labels
from .registries import Registry


def test_unreachable_engine_is_one_line_exit_2(tmp_path):
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    for args in (
        ["build", "--release", "21.08"],
        ["push", "x:y", "--registry", "localhost:5000"],
        ["test", "x:y"],
        ["base", "--release", "21.08"],
    ):
        out = builder(*args, env=env)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.strip().splitlines() == [
            f"error: cannot reach the Docker engine at unix://{tmp_path}/no-engine.sock (DockerException); "
            "start it with `bash scripts/setup.sh`"
        ], out.stderr
    doctor = builder("doctor", env=env)
    assert doctor.returncode == 1 and "FAIL engine" in doctor.stdout


@pytest.mark.parametrize(
    "args,text",
    [
        (["build", "--release", "21.08", "--all", "--variant", "tf2-py3"], "--all and --variant exclude each other"),
        (["build", "--release", "21.08", "--all", "--tag", "a/b:c"], "--tag names one image"),
        (["build", "--release", "21.08", "--bake-ca"], "--bake-ca needs at least one --ca-bundle"),
        (["build", "--release", "21.08", "--env", "TF_ENABLE_XLA=0"], "TF_ENABLE_XLA is a build parameter"),
        (
            ["push", "a:b", "--registry", "localhost:5000", "--password-stdin", "--password-env", "X"],
            "exclude each other",
        ),
        (["render", "--all", "--release", "21.08"], "--all renders the catalog as it is"),
    ],
)
def test_conflicting_options_change_nothing(args, text):
    images = lambda: set(docker("images", "-aq", "--no-trunc").stdout.split())  # noqa: E731 (order varies)
    before = images()
    out = builder(*args)
    assert out.returncode == 2 and text in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert images() == before


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_push_moves_no_tag_and_publishes_nothing(release_image, tmp_path_factory, sig, code):
    reg = Registry(tmp_path_factory.mktemp(f"registry-int{code}")).start()
    ref = f"{reg.host}/tensorflow:21.08-tf2-py3"
    try:
        proc = subprocess.Popen(
            ["builder", "push", release_image, "--registry", reg.host, "--insecure-registry"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until layers are on their way
            if any(reg.storage.rglob("data")) or list(reg.storage.rglob("_uploads")):
                break
            time.sleep(0.2)
        time.sleep(1)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == code, err
        assert "no tag was moved" in err
        assert image_id(ref) is None  # the local registry tag was taken back
        req = urllib.request.Request(f"http://{reg.host}/v2/tensorflow/manifests/21.08-tf2-py3", method="HEAD")
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=10)
        assert exc.value.code == 404  # nothing was published under the tag
    finally:
        reg.cleanup()


def test_two_builds_at_once_both_tag_correctly(release_image, compile_cache):
    """Two builds of different images run at once (they share every layer up to the
    environment defaults) and each tag names its own result."""
    procs = [
        subprocess.Popen(
            [
                "builder",
                "build",
                "--no-sbom",
                "--release",
                "21.08",
                "--repo",
                f"itest/concurrent-{i}",
                "--build-id",
                f"c-{i}",
                "--env",
                f"CONCURRENT_MARKER={i}",
                "--compile-cache",
                compile_cache,
                "-q",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    results = [p.communicate(timeout=1800) + (p.returncode,) for p in procs]
    for _out, err, rc in results:
        assert rc == 0, err
    for i in (1, 2):
        ref = f"itest/concurrent-{i}:21.08-tf2-py3"
        lab = labels(ref)
        assert lab["dev.tfbuilder.variant"] == "tf2-py3" and lab["com.nvidia.build.id"] == f"c-{i}"
        env = json.loads(docker("image", "inspect", "--format", "{{json .Config.Env}}", ref).stdout)
        assert f"CONCURRENT_MARKER={i}" in env and "NVIDIA_TENSORFLOW_VERSION=21.08-tf2" in env
        docker("rmi", ref, f"{ref}-c-{i}")


def test_two_builds_of_the_same_tag_end_with_one_consistent_image(release_image, scratch_tag, compile_cache):
    procs = [
        subprocess.Popen(
            [
                "builder",
                "build",
                "--no-sbom",
                "--release",
                "21.08",
                "--tag",
                scratch_tag,
                "--build-id",
                f"same-{i}",
                "--env",
                f"RACE_MARKER={i}",
                "--compile-cache",
                compile_cache,
                "-q",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=1800)
        assert p.returncode == 0, err
    lab = labels(scratch_tag)
    env = json.loads(docker("image", "inspect", "--format", "{{json .Config.Env}}", scratch_tag).stdout)
    winner = lab["com.nvidia.build.id"].split("-")[1]
    assert f"RACE_MARKER={winner}" in env and f"NVIDIA_BUILD_ID=same-{winner}" in env
    # the loser's image, which the winner's tag left without a name (the builder never
    # deletes an image that was tagged: it may be someone's), is this test's to remove
    loser = "2" if winner == "1" else "1"
    left = docker("images", "-q", "--no-trunc", "--filter", f"label=com.nvidia.build.id=same-{loser}").stdout.split()
    assert len(left) <= 1, left
    for image in left:
        assert docker("rmi", image).returncode == 0


BRIDGE = "tfbtiny0"


@pytest.fixture
def tiny_engine():
    """A second, throwaway Docker engine whose data root is a 300 MB tmpfs: a disk that fills.

    It gets a bridge of its own: with --bridge=none, dockerd deletes the host's docker0 and
    breaks the main engine's networking. Its address is from TEST-NET-1, which is never
    routed: its builds reach no network. Yields (DOCKER_HOST environment, tmpfs root)."""
    import tempfile

    root = tempfile.mkdtemp(prefix="tfb-tiny-", dir="/tmp")  # short: unix socket paths are limited
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300m", "tmpfs", root], check=True)
    subprocess.run(["ip", "link", "add", "name", BRIDGE, "type", "bridge"], check=True)
    subprocess.run(["ip", "addr", "add", "192.0.2.1/24", "dev", BRIDGE], check=True)
    subprocess.run(["ip", "link", "set", BRIDGE, "up"], check=True)
    sock = f"unix://{root}/d.sock"
    log = open(f"/tmp/{os.path.basename(root)}.log", "w")
    # Its own (empty) daemon.json: the machine's turns on the containerd store, which
    # refuses --storage-driver and would keep a second copy of each layer in the tmpfs.
    Path(root, "daemon.json").write_text("{}")
    proc = subprocess.Popen(
        [
            "dockerd",
            "--config-file",
            f"{root}/daemon.json",
            "--data-root",
            f"{root}/data",
            "--exec-root",
            f"{root}/x",
            "--pidfile",
            f"{root}/pid",
            "-H",
            sock,
            "-b",
            BRIDGE,
            "--iptables=false",
            "--ip-masq=false",
            "--storage-driver=overlay2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    env = {**os.environ, "DOCKER_HOST": sock}
    try:
        for _ in range(100):
            if subprocess.run(["docker", "info"], env=env, capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the throwaway engine did not start: {open(log.name).read()[-1000:]}")
        save = subprocess.Popen(["docker", "save", "local/debian-rootfs:bullseye"], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "load"], stdin=save.stdout, env=env, capture_output=True, text=True)
        save.wait()
        assert load.returncode == 0, load.stderr
        yield env, Path(root)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        subprocess.run(["umount", "-l", root], capture_output=True)
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        assert subprocess.run(["ip", "link", "show", "docker0"], capture_output=True).returncode == 0, (
            "the throwaway engine took the main engine's docker0 with it"
        )


def test_full_disk_reported_by_the_engine(offline_base, tiny_engine):
    """The engine's disk is full (a filler file takes what the base image left): one clear
    report, exit 2, no tag. (Its builds have no network, so the disk must be full before
    the first download.)"""
    env, root = tiny_engine
    free = shutil.disk_usage(root).free
    subprocess.run(["fallocate", "-l", str(max(free - 256 * 1024, 0)), str(root / "filler")], check=True)
    out = builder(
        "build",
        "--no-sbom",
        "--release",
        "21.08",
        "--base",
        "local/debian-rootfs:bullseye",
        "--tag",
        "tiny/full:1",
        "-q",
        env=env,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert "the engine ran out of disk space" in out.stderr and "no tag was moved" in out.stderr
    listed = subprocess.run(["docker", "images", "-q", "tiny/full:1"], env=env, capture_output=True, text=True)
    assert listed.stdout.strip() == ""
