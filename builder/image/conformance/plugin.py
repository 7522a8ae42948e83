"""pytest plugin of the conformance suite: the image under test, a container of it that
is always removed, and what the image says about itself (labels, env, build info)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import uuid

import pytest

from builder import catalog
from builder.core.contract import InImage, Label


def pytest_addoption(parser):
    parser.addoption("--image", action="store", required=True, help="image to test")
    parser.addoption(
        "--container-name",
        action="store",
        default=None,
        help="name of the test container (the builder removes it on an interrupt)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU visible to the engine")


def docker(*args: str, check: bool = True, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def gpu_visible() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    info = docker("info", "--format", "{{json .Runtimes}}", check=False).stdout
    return "nvidia" in info


def pytest_collection_modifyitems(config, items):
    if gpu_visible():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU visible to the engine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def image(request) -> str:
    return request.config.getoption("--image")


@pytest.fixture(scope="session")
def inspect(image) -> dict:
    out = docker("image", "inspect", image, check=False)
    if out.returncode != 0:
        pytest.exit(f"no image '{image}' in the engine", returncode=2)
    return json.loads(out.stdout)[0]


@pytest.fixture(scope="session")
def labels(inspect) -> dict:
    return dict(inspect["Config"].get("Labels") or {})


@pytest.fixture(scope="session")
def image_env(inspect) -> dict:
    return dict(e.split("=", 1) for e in inspect["Config"].get("Env") or [])


@pytest.fixture(scope="session")
def release_data(labels):
    """The catalog's release and variant this image says it was built from."""
    rel = catalog.load_selected().get(labels[Label.RELEASE])  # BUILDER_CATALOG: a private catalog
    return rel, rel.variant(labels[Label.VARIANT])


@pytest.fixture(scope="session")
def container(image, request):
    """A long-running container of the image (entrypoint bypassed), always removed."""
    name = request.config.getoption("--container-name") or f"conformance-{uuid.uuid4().hex[:10]}"
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ...: one container each (runner.container_names)
    if worker:
        name = f"{name}-{worker}"
    docker("run", "-d", "--name", name, "--entrypoint", "sleep", image, "infinity")
    try:
        yield name
    finally:
        docker("rm", "-f", name, check=False)


@pytest.fixture(scope="session")
def host(container):
    import testinfra

    return testinfra.get_host(f"docker://{container}")


@pytest.fixture(scope="session")
def report(host, labels) -> dict:
    """What the image holds, asked now, in the container (image_report.py)."""
    caps = labels.get(Label.CUDA_COMPUTE_CAPABILITIES, "")
    out = host.run(f"cd / && python3 {InImage.IMAGE_REPORT} --requested {shlex.quote(caps)}")
    assert out.rc == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def build_info(host) -> dict:
    """What nvbuild.sh recorded when it built the image (the banner reads it)."""
    return json.loads(host.file(InImage.BUILD_INFO).content_string)


@pytest.fixture(scope="session")
def python(host):
    """python(code) runs Python in the container with TensorFlow's log noise off."""

    def run(code: str, timeout: int = 600):
        return host.run(f"cd / && TF_CPP_MIN_LOG_LEVEL=2 timeout {timeout} python3 -c {shlex.quote(code)}")

    return run


@pytest.fixture(scope="session")
def run_image(image):
    """Run the image with its entrypoint: run_image(*docker_run_flags, cmd=[...])."""

    def run(*flags: str, cmd: tuple[str, ...] = ("true",)) -> subprocess.CompletedProcess:
        return docker("run", "--rm", *flags, image, *cmd, check=False)

    return run
