import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from builder import catalog


@pytest.fixture(autouse=True)
def _own_cache_dir(tmp_path_factory, monkeypatch):
    """Whatever a unit test writes into the builder's cache (logs, the push ledger) goes to
    a directory of its own, never the user's ~/.cache/tfbuilder."""
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def make_catalog(tmp_path):
    """A catalog directory holding the real _common.yaml plus the given files."""

    count = iter(range(1000))

    def make(files: dict[str, str], with_common: bool = True) -> Path:
        d = tmp_path / f"releases{next(count)}"
        d.mkdir()
        if with_common:
            shutil.copy(catalog.RELEASES_DIR / "_common.yaml", d / "_common.yaml")
        for name, text in files.items():
            (d / name).write_text(textwrap.dedent(text))
        return d

    return make


# A minimal valid release on top of _common, for tests to break one field at a time.
GOOD = """\
release: "30.01"
parent: _common
os: {distro: ubuntu, version: "22.04"}
python: "3.10"
cuda: "11.8.0"
base:
  upstream: {image: "nvcr.io/nvidia/cuda:11.8.0-devel-ubuntu22.04"}
  offline: {debian: bookworm, cuda: "11.8", python: "3.11"}
build:
  cuda_compute_capabilities: ["7.0", "8.0"]
variants:
  tf1-py3: null
  tf2-py3:
    framework: {version: "2.14.1"}
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A plain virtual environment's Python, for scripts that must not see the test's packages."""
    d = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(d)], check=True)
    return d / "bin" / "python"


@pytest.fixture
def loopback_http():
    """Something answering HTTP on loopback, as a cache server would: its root URL."""
    import http.server
    import threading

    httpd = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


# A bare tree's stand-in for builder/in_image/image_report.py (nvbuild.sh's one report writer): the
# installed framework's own build info, which is what these tests check.
STUB_REPORT = """import json
try:
    import tfext as fw
    info = dict(fw.sysconfig.get_build_info())
except ImportError:
    import tensorflow as fw
    info = dict(fw.sysconfig.get_build_info(), framework_name="TensorFlow", version=fw.__version__)
print(json.dumps(info, default=str))
"""
