"""The image's Python environment as its users meet it: every installed package pinned
through PIP_CONSTRAINT, so pip's resolver keeps the framework's pins (offline, with wheels
made here), and `pip check` clean. (The tools, JupyterLab and TensorBoard, are components:
their tests are in builder/components/.)"""

import re
import secrets
import shlex

import pytest

from builder.core import contract
from builder.core.contract import InImage

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
