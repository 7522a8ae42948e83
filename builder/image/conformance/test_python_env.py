"""The image's Python environment as its users meet it: every installed package pinned
through PIP_CONSTRAINT, so pip's resolver keeps the framework's pins (offline, with wheels
made here), `pip check` clean, and the tools the catalog installs (TensorBoard,
JupyterLab) serving on the ports the image declares."""

import json
import re
import secrets
import shlex

import pytest

from builder.core import contract
from builder.core.contract import InImage, Label

# Two wheels written in the container: one that fits every pin, one that asks for a numpy
# no image has. Installed with --no-index: pip's resolver against the constraints alone.
MAKE_WHEELS = r"""
import base64, hashlib, sys, zipfile
def wheel(name, requires):
    dist = f"{name}-1.0.dist-info"
    files = {f"{name}/__init__.py": "",
             f"{dist}/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n%s" % (
                 name, "".join(f"Requires-Dist: {r}\n" for r in requires)),
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: conformance\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    rows = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},"
            f"{len(t.encode())}" for p, t in files.items()]
    files[f"{dist}/RECORD"] = "\n".join(rows + [f"{dist}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(f"{sys.argv[1]}/{name}-1.0-py3-none-any.whl", "w") as z:
        for p, t in files.items():
            z.writestr(p, t)
wheel("pin_probe_fits", ["numpy", "tensorflow"])
wheel("pin_probe_conflicts", ["numpy<1"])
"""


@pytest.fixture(scope="module", autouse=True)
def pinned_image(image_env):
    """An image built before images pinned their packages (a derive's older parent) has
    none of what this module checks."""
    if "PIP_CONSTRAINT" not in image_env:
        pytest.skip("built before images pinned their Python packages (no PIP_CONSTRAINT)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(report) -> dict[str, str]:
    return {canonical(k): v for k, v in report["packages"].items()}


def test_pip_constraint_pins_every_installed_package(host, image_env, report, release_data):
    assert image_env.get("PIP_CONSTRAINT") == InImage.PIP_CONSTRAINT
    pins = dict(re.findall(r"^([a-z0-9-]+)==(\S+)$", host.file(InImage.PIP_CONSTRAINT).content_string, re.M))
    have = installed(report)
    assert pins.get("numpy") and pins.get(canonical(release_data[1].package)) == report["version"], pins
    assert {n: have.get(n) for n in pins} == pins
    lock = host.file(contract.lock_file(report["python"].rsplit(".", 1)[0])).content_string
    locked = {canonical(n) for n in re.findall(r"^([A-Za-z0-9_.-]+)==", lock, re.M)} - {"pip"}
    assert locked <= set(pins), sorted(locked - set(pins))


def test_pip_check_is_clean(host):
    out = host.run("python3 -m pip check")
    assert out.rc == 0, out.stdout + out.stderr


def test_pip_install_keeps_the_pins_or_names_the_one_it_would_move(host, report):
    work = f"/tmp/pin-probe-{secrets.token_hex(4)}"
    assert host.run(f"mkdir -p {work} && python3 -c {shlex.quote(MAKE_WHEELS)} {work}").rc == 0
    pip = f"python3 -m pip install --no-index --find-links {work}"
    try:
        bad = host.run(f"{pip} pin_probe_conflicts")
        numpy = installed(report)["numpy"]
        assert bad.rc != 0 and f"(constraint) numpy=={numpy}" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
        good = host.run(f"{pip} pin_probe_fits")
        assert good.rc == 0, good.stdout + good.stderr
        after = host.run("python3 -c 'import importlib.metadata as m; print(m.version(\"numpy\"))'").stdout.strip()
        assert after == numpy
        assert host.run("python3 -m pip check").rc == 0
    finally:
        host.run(f"python3 -m pip uninstall -y -q pin_probe_fits; rm -rf {work}")


# --- tools ------------------------------------------------------------------------------------
def left_out(labels) -> set[str]:
    return set(filter(None, labels.get(Label.WITHOUT, "").split(",")))


@pytest.fixture(scope="module")
def tools(release_data, labels) -> dict[str, str]:
    """The catalog's tools the image was built with (not left out with --without)."""
    return {k: v for k, v in release_data[0].tools.items() if k not in left_out(labels)}


def test_each_catalog_tool_is_installed_and_labelled(release_data, report, labels, tools):
    have = installed(report)
    rel = release_data[0]
    wanted = {rel.tool_package(t) for t in tools}
    for tool in tools:
        assert have.get(rel.tool_package(tool)), tool
    for tool in left_out(labels) & set(rel.tools):  # --without: not there
        assert rel.tool_package(tool) not in have, tool
    said = dict(p.split("=", 1) for p in labels.get(Label.TOOLS, "").split() if "=" in p)
    assert {n: v for n, v in said.items() if n in wanted} == {n: have[n] for n in wanted}


def wait_for_http(host, url: str, seconds: int = 90) -> str:
    code = (
        "import sys, time, urllib.request\n"
        f"for _ in range({seconds * 2}):\n"
        "    try:\n"
        f"        print(urllib.request.urlopen({url!r}, timeout=5).read().decode()); sys.exit(0)\n"
        "    except Exception as exc:\n"
        "        err = exc; time.sleep(0.5)\n"
        "print(err, file=sys.stderr); sys.exit(1)"
    )
    out = host.run(f"python3 -c {shlex.quote(code)}")
    assert out.rc == 0, out.stderr
    return out.stdout


def test_tensorboard_serves_a_log_dir_on_its_port(host, tools, image_env):
    if "tensorboard" not in tools:
        pytest.skip("the release installs no TensorBoard")
    port = image_env["TENSORBOARD_PORT"]
    logs = f"/tmp/tb-{secrets.token_hex(4)}"
    write = (
        f"import tensorflow as tf\nw = tf.summary.create_file_writer('{logs}/run-a')\n"
        "with w.as_default():\n    [tf.summary.scalar('loss', 1.0 / (s + 1), step=s) for s in range(3)]\nw.flush()"
    )
    assert host.run(f"cd / && TF_CPP_MIN_LOG_LEVEL=2 python3 -c {shlex.quote(write)}").rc == 0
    host.run(
        f'sh -c \'tensorboard --logdir {logs} --bind_all --port "$TENSORBOARD_PORT" '
        f"> {logs}.log 2>&1 & echo $! > {logs}.pid'"
    )
    try:
        runs: list = []
        for _ in range(30):  # the first scan of the log directory may come after the server answers
            runs = json.loads(wait_for_http(host, f"http://127.0.0.1:{port}/data/runs"))
            if runs:
                break
            host.run("sleep 1")
        assert runs == ["run-a"], runs
    finally:
        host.run(f"kill $(cat {logs}.pid)")


def test_jupyterlab_starts_on_its_port_with_the_token_from_the_environment(host, release_data, image_env, tools):
    if "jupyter" not in tools:
        pytest.skip(f"the release installs no JupyterLab: {release_data[0].tools_absent.get('jupyter', 'none named')}")
    port = image_env["JUPYTER_PORT"]
    token = secrets.token_hex(16)
    run = f"/tmp/jupyter-{token[:6]}"
    host.run(
        f"sh -c 'cd {InImage.WORKSPACE} && JUPYTER_TOKEN={token} jupyter lab > {run}.log 2>&1 & echo $! > {run}.pid'"
    )
    try:
        status = json.loads(wait_for_http(host, f"http://127.0.0.1:{port}/api/status?token={token}"))
        assert "started" in status, status
        contents = json.loads(wait_for_http(host, f"http://127.0.0.1:{port}/api/contents?token={token}"))
        assert {c["name"] for c in contents["content"]} >= {"nvidia-examples", "docker-examples"}
        anonymous = (
            "import urllib.request, urllib.error\ntry:\n"
            f"    urllib.request.urlopen('http://127.0.0.1:{port}/api/contents'); print('open')\n"
            "except urllib.error.HTTPError as e:\n    print(e.code)"
        )
        assert host.run(f"python3 -c {shlex.quote(anonymous)}").stdout.strip() == "403"
    finally:
        host.run(f"kill $(cat {run}.pid)")


def test_jupyterlab_without_a_token_makes_its_own(host, tools, image_env):
    """No JUPYTER_TOKEN or JUPYTER_PASSWORD: jupyter makes a random token, never a fixed one."""
    if "jupyter" not in tools:
        pytest.skip("the release installs no JupyterLab")
    port = image_env["JUPYTER_PORT"]
    run = f"/tmp/jupyter-{secrets.token_hex(4)}"
    host.run(
        f"sh -c 'cd / && env -u JUPYTER_TOKEN -u JUPYTER_PASSWORD jupyter lab > {run}.log 2>&1 & echo $! > {run}.pid'"
    )
    try:
        found = host.run(f"for i in $(seq 120); do grep -o 'token=[0-9a-f]*' {run}.log && break; sleep 0.5; done")
        token = found.stdout.split("token=")[-1].strip()
        assert re.fullmatch(r"[0-9a-f]{32,}", token), host.file(f"{run}.log").content_string[-2000:]
        status = json.loads(wait_for_http(host, f"http://127.0.0.1:{port}/api/status?token={token}"))
        assert "started" in status
    finally:
        host.run(f"kill $(cat {run}.pid)")
