"""Corporate settings: what the settings server offers and how the in-image wrapper uses it."""
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from builder import buildsettings, paths
from builder.buildsettings import BuildSettings
from builder.errors import UserError

WRAPPER = paths.templates_dir() / "with-build-settings"
SOURCES = """deb http://deb.debian.org/debian bookworm main contrib non-free
deb http://deb.debian.org/debian bookworm-updates main contrib non-free
deb http://deb.debian.org/debian-security bookworm-security main
"""
PEM = "-----BEGIN CERTIFICATE-----\nTESTCAUNIQUE\n-----END CERTIFICATE-----\n"


def test_empty_settings_serve_nothing():
    with buildsettings.serve(BuildSettings()) as url:
        assert url is None


@pytest.mark.parametrize("kw,msg", [
    ({"apt_mirror": "ftp://x"}, "--apt-mirror 'ftp://x' is not an http"),
    ({"pip_index": "pypi"}, "--pip-index 'pypi' is not an http"),
    ({"ca_bundles": (Path("/nonexistent.pem"),)}, "--ca-bundle /nonexistent.pem: no such file"),
])
def test_bad_settings(kw, msg):
    with pytest.raises(UserError, match=msg):
        BuildSettings(**kw).validate()


def test_not_a_pem(tmp_path):
    f = tmp_path / "x.pem"
    f.write_text("hello")
    with pytest.raises(UserError, match="not a PEM certificate bundle"):
        BuildSettings(ca_bundles=(f,)).validate()


def _wrapper(url, command, env=None):
    return subprocess.run(["bash", str(WRAPPER), "bash", "-c", command], capture_output=True, text=True,
                          env={**os.environ, "BUILD_SETTINGS": url or "", **(env or {})}, timeout=30)


def test_wrapper_exports_settings_for_one_command_and_removes_them(tmp_path):
    ca = tmp_path / "corp.pem"
    ca.write_text(PEM)
    settings = BuildSettings(apt_mirror="http://mirror.corp/debian", pip_index="https://u:s3cret@pypi.corp/simple",
                             ca_bundles=(ca,))
    with buildsettings.serve(settings, 18741) as url:
        assert url.startswith("http://127.0.0.1:18741/")
        assert urllib.request.urlopen(url + "/index").read() == b"apt-mirror\nca.crt\npip-index\n"
        sources = tmp_path / "sources.list"
        sources.write_text(SOURCES)
        out = _wrapper(url, 'echo "$PIP_INDEX_URL"; cat "$PIP_CERT" | grep -c TESTCAUNIQUE; '
                            'cat "$(dirname "$APT_CONFIG")/sources.list"; dirname "$APT_CONFIG"',
                       env={"WITH_BUILD_SETTINGS_SOURCES": str(sources)})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "https://u:s3cret@pypi.corp/simple"
    assert lines[1] == "1"
    # The main archive is swapped for the mirror; suites, components and security stay.
    assert lines[2:-1] == [
        "deb http://mirror.corp/debian bookworm main contrib non-free",
        "deb http://mirror.corp/debian bookworm-updates main contrib non-free",
        "deb http://deb.debian.org/debian-security bookworm-security main",
    ]
    assert not Path(lines[-1]).exists(), "the settings directory outlived the command"


def test_wrapper_keeps_the_exit_code_and_is_a_no_op_without_settings():
    assert _wrapper(None, "exit 3").returncode == 3
    out = _wrapper(None, 'echo "[${PIP_INDEX_URL:-}]"')
    assert out.stdout.strip() == "[]"


def test_wrapper_fails_clearly_when_the_server_is_gone():
    out = _wrapper("http://127.0.0.1:1", "true")
    assert out.returncode != 0 and "cannot read settings" in out.stderr


def test_concurrent_builds_share_the_daemon_and_settings_vanish_after(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    a, b = BuildSettings(pip_index="https://a.example/simple"), BuildSettings(pip_index="https://b.example/simple")
    with buildsettings.serve(a, 18742) as url_a, buildsettings.serve(a, 18742) as url_a2, \
            buildsettings.serve(b, 18742) as url_b:
        assert url_a == url_a2 != url_b                      # same settings, same URL (cache keys stay put)
        assert b"a.example" in urllib.request.urlopen(url_a + "/pip-index").read()
        assert b"b.example" in urllib.request.urlopen(url_b + "/pip-index").read()
        state = tmp_path / "cache" / "settings"
    import time
    for _ in range(50):                                      # the daemon removes what nobody holds
        if not any(p.is_dir() for p in state.iterdir()):
            break
        time.sleep(0.2)
    assert not any(p.is_dir() for p in state.iterdir())


def test_a_foreign_server_on_the_port_is_reported():
    import http.server
    import threading

    httpd = http.server.HTTPServer(("127.0.0.1", 18743), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(UserError, match="port 18743 is taken by something else"):
            with buildsettings.serve(BuildSettings(pip_index="https://x.example/simple"), 18743):
                pass
    finally:
        httpd.shutdown()
