"""Integration fixtures: a real Docker engine and images built through the `builder` CLI.

These tests need the engine (scripts/setup.sh starts it); without one they fail rather
than skip, so a CI machine that lost its engine cannot pass silently.
"""

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from .registries import free_port

REPO = "itest/tensorflow"
BUILD_ID = "itest"


def run(*cmd, timeout=3600, check=False, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=check, **kw)


def builder(*args, timeout=3600, **kw):
    return run("builder", *args, timeout=timeout, **kw)


def docker(*args, **kw):
    return run("docker", *args, **kw)


def image_id(ref):
    out = docker("image", "inspect", "--format", "{{.Id}}", ref)
    return out.stdout.strip() if out.returncode == 0 else None


def labels(ref):
    return json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", ref).stdout)


def coverage_cells(text: str) -> dict[str, dict[str, str]]:
    """`builder inspect --coverage`'s table: {row (a component with its version, "cuDNN 8.5.0",
    or one of its binaries' file names): {capability: cell ("sm_86", "compute_80 (278/279)", "none")}}."""
    lines = text.splitlines()
    table = lines[: lines.index("")] if "" in lines else lines
    header = re.split(r"\s{2,}", table[0].strip())
    return {
        cells[0]: dict(zip(header[1:], cells[1:]))
        for cells in (re.split(r"\s{2,}", line.strip()) for line in table[1:])
    }


def coverage_verdicts(text: str) -> dict[str, str]:
    """`builder inspect --coverage`'s verdict lines, one per capability (wrapped lines joined)."""
    lines = text.rstrip().splitlines()
    block = lines[len(lines) - lines[::-1].index("") :]
    out: dict[str, str] = {}
    for line in block:
        if line[:1].isdigit():
            arch, _, rest = line.partition(" ")
            out[arch] = rest.strip()
        elif out:
            out[list(out)[-1]] += " " + line.strip()
    return out


def component_row(cells: dict[str, dict[str, str]], name: str) -> dict[str, str]:
    """The row of the component whose name (without its version) is NAME."""
    return next(row for key, row in cells.items() if key == name or key.startswith(name + " "))


# Fixtures that build an image (the offline base, the release image): a test using one
# is `slow` (`-m "not slow"` runs the engine tests that only use existing images).
BUILDING_FIXTURES = {"offline_base", "release_image"}


# The largest images of the run (26.11's, 20 GB with their base) are built and removed
# first, before the others fill the disk.
FIRST = "tests/integration/test_release_2611.py"


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: 0 if item.nodeid.startswith(FIRST) else 1)  # stable: the rest keep their order
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.engine)
            if BUILDING_FIXTURES & set(getattr(item, "fixturenames", ())) or "build" in item.name:
                item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def engine_up():
    out = docker("info", "--format", "{{.ServerVersion}}")
    if out.returncode != 0:
        pytest.fail("no Docker engine answers: run `bash scripts/setup.sh` first", pytrace=False)


# Below this, an image build or a push cannot finish: the engine then stalls or fails
# deep inside a step, and a test would wait on it instead of saying why.
MIN_FREE_DISK = 4e9


# An engine this large is swapping the machine to a standstill (tests/conftest.py): every
# test would wait on it until its timeout; they fail at once instead, saying why.
MAX_ENGINE_MEMORY = 12 << 30


@pytest.fixture(autouse=True)
def machine_can_run():
    import shutil

    from tests.conftest import dockerd_rss

    for path in ("/var/lib/docker", "/tmp"):
        free = shutil.disk_usage(path).free
        if free < MIN_FREE_DISK:
            pytest.fail(
                f"only {free / 1e9:.1f} GB free on {path}: the engine cannot build or push "
                "(free some space; `docker system df` shows what the engine holds)",
                pytrace=False,
            )
    rss = dockerd_rss()
    if rss and rss > MAX_ENGINE_MEMORY:
        pytest.fail(
            f"dockerd holds {rss / 2**30:.1f} GiB of memory: the engine is stalling the machine "
            "(stop it and run `bash scripts/setup.sh` to start it again)",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("builder-cache")
    os.environ["BUILDER_CACHE_DIR"] = str(d)
    return d


# The 21.08 offline base, built in the background while the 26.11 module tests its images
# (test_release_2611.py starts it once its build is done, when its disk peak has passed):
# apt downloads and the export overlap the containers it runs, about 3 minutes a run.
_base_build: dict = {}  # "proc": the Popen, then "done": its CompletedProcess


def start_offline_base() -> None:
    """`builder base --release 21.08` in the background (once); `offline_base` takes it."""
    if not _base_build:
        import tempfile

        # files, not pipes: nobody reads them until it ends, and a full pipe would stall it
        _base_build["out"] = [tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")]
        _base_build["proc"] = subprocess.Popen(
            ["builder", "base", "--release", "21.08", "-q"],
            text=True,
            stdout=_base_build["out"][0],
            stderr=_base_build["out"][1],
        )


def wait_offline_base(timeout: float = 3600) -> subprocess.CompletedProcess | None:
    """The background base build's result (None when none was started)."""
    if "proc" in _base_build and "done" not in _base_build:
        proc = _base_build["proc"]
        proc.wait(timeout=timeout)
        for f in _base_build["out"]:
            f.seek(0)
        out, err = (f.read() for f in _base_build["out"])
        _base_build["done"] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return _base_build.get("done")


@pytest.fixture(scope="session", autouse=True)
def no_background_build_outlives_the_run():
    yield
    proc = _base_build.get("proc")
    if proc and proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.fixture(scope="session")
def offline_base(cache_dir):
    out = wait_offline_base() or builder("base", "--release", "21.08", "-q")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture(scope="session")
def cache_server(tmp_path_factory):
    """A shared compile cache for the run: the release build seeds it, so every derived
    and toggled build after it recompiles only what changed. BUILDER_TEST_CACHE_DIR names
    a cache directory whose server is already running (`builder cache serve --detach`), so
    a developer's second run reuses its layers and objects; CI starts a fresh one."""
    reuse = os.environ.get("BUILDER_TEST_CACHE_DIR")
    if reuse:
        stats = json.loads(builder("cache", "stats", "--dir", reuse, "--json").stdout)
        assert stats["running"], f"BUILDER_TEST_CACHE_DIR={reuse}: no cache server runs for it"
        yield stats["url"], Path(reuse)
        return
    directory = tmp_path_factory.mktemp("compile-cache")
    # On docker0's address: builds reach it over their default network, so they share
    # their layers with every other build and bake of the run (a loopback server would put
    # them on the host network, whose RUN steps BuildKit keys apart: a second copy of
    # each image's layers, 7 GB for the release image).
    out = builder(
        "cache",
        "serve",
        "--detach",
        "--dir",
        str(directory),
        "--port",
        str(free_port()),
        "--listen",
        docker_bridge_address(),
    )
    assert out.returncode == 0, out.stderr
    yield out.stdout.strip(), directory
    builder("cache", "stop", "--dir", str(directory))


def docker_bridge_address() -> str:
    """docker0's IPv4 address (its containers' gateway), or loopback without one."""
    out = run("ip", "-o", "-4", "addr", "show", "docker0").stdout.split()
    return out[3].split("/")[0] if len(out) > 3 else "127.0.0.1"


@pytest.fixture(scope="session")
def compile_cache(cache_server) -> str:
    return f"{cache_server[0]}/ccache"


@pytest.fixture(scope="session")
def release_image(offline_base, compile_cache):
    """The 21.08 tf2 image, built the way README's first command builds it (plus the
    run's compile cache, which it seeds): built once per run, every other test image
    derives from it or reuses its layers."""
    out = builder(
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
        "-q",
    )
    assert out.returncode == 0, out.stderr
    refs = out.stdout.split()
    assert refs == [f"{REPO}:21.08-tf2-py3", f"{REPO}:21.08-tf2-py3-{BUILD_ID}"]
    return refs[0]


@pytest.fixture
def scratch_tag():
    """A unique tag for one test, removed afterwards."""
    ref = f"itest/scratch:{uuid.uuid4().hex[:8]}"
    yield ref
    docker("rmi", "-f", ref)


def build_containers():
    """Containers the legacy builder creates (they run image ids, not tags)."""
    out = docker("ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Image}}")
    return {
        line.split()[0]
        for line in out.stdout.splitlines()
        if len(line.split()) > 1 and (line.split()[1].startswith("sha256:") or len(line.split()[1]) in (12, 64))
    }
