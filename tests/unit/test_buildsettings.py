"""Corporate settings: what the settings server offers and how the in-image wrapper uses it."""

import http.server
import os
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.core import paths
from builder.core.errors import UserError
from builder.engine import settings_server
from builder.engine.buildsettings import BuildSettings

WRAPPER = paths.templates_dir() / "with-build-settings"
SOURCES = """deb http://deb.debian.org/debian bookworm main contrib non-free
deb http://deb.debian.org/debian bookworm-updates main contrib non-free
deb http://deb.debian.org/debian-security bookworm-security main
"""
PEM = "-----BEGIN CERTIFICATE-----\nTESTCAUNIQUE\n-----END CERTIFICATE-----\n"


def test_empty_settings_serve_nothing():
    with settings_server.serve_settings(BuildSettings()) as url:
        assert url is None


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"apt_mirror": "ftp://x"}, "--apt-mirror 'ftp://x' is not an http"),
        ({"pip_index": "pypi"}, "--pip-index 'pypi' is not an http"),
        ({"ca_bundles": (Path("/nonexistent.pem"),)}, "--ca-bundle /nonexistent.pem: no such file"),
    ],
)
def test_bad_settings(kw, msg):
    with pytest.raises(UserError, match=msg):
        BuildSettings(**kw).validate()


def test_not_a_pem(tmp_path):
    f = tmp_path / "x.pem"
    f.write_text("hello")
    with pytest.raises(UserError, match="not a PEM certificate bundle"):
        BuildSettings(ca_bundles=(f,)).validate()


def _wrapper(url, command, env=None):
    return subprocess.run(
        ["bash", str(WRAPPER), "bash", "-c", command],
        capture_output=True,
        text=True,
        env={**os.environ, "BUILD_SETTINGS": url or "", **(env or {})},
        timeout=30,
    )


@pytest.fixture
def open_server(tmp_path, monkeypatch):
    """The real handler in-process, its container check replaced (tested on its own
    below): for the wrapper and the path rules, which run on the host."""
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    server = settings_server.make_server(settings_server.state_dir(), 0, peer_allowed=lambda peer, local: True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_wrapper_exports_settings_for_one_command_and_removes_them(tmp_path, open_server):
    ca = tmp_path / "corp.pem"
    ca.write_text(PEM)
    settings = BuildSettings(
        apt_mirror="http://mirror.corp/debian", pip_index="https://u:s3cret@pypi.corp/simple", ca_bundles=(ca,)
    )
    with settings_server.hold(settings) as (state, name):
        url = f"http://127.0.0.1:{open_server}/{name}"
        assert urllib.request.urlopen(url + "/index").read() == b"apt-mirror\nca.crt\npip-index\n"
        sources = tmp_path / "sources.list"
        sources.write_text(SOURCES)
        out = _wrapper(
            url,
            'echo "$PIP_INDEX_URL"; cat "$PIP_CERT" | grep -c TESTCAUNIQUE; '
            'cat "$(dirname "$APT_CONFIG")/sources.list"; dirname "$APT_CONFIG"',
            env={"WITH_BUILD_SETTINGS_SOURCES": str(sources)},
        )
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


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_concurrent_builds_share_the_daemon_and_settings_vanish_after(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BUILDER_SETTINGS_PORT", raising=False)
    a, b = BuildSettings(pip_index="https://a.example/simple"), BuildSettings(pip_index="https://b.example/simple")
    with (
        settings_server.serve_settings(a) as url_a,
        settings_server.serve_settings(a) as url_a2,
        settings_server.serve_settings(b) as url_b,
    ):
        assert url_a == url_a2 != url_b  # same settings, same URL (cache keys stay put)
        state = tmp_path / "cache" / "settings"
        token_a = url_a.rsplit("/", 1)[1]
        assert re.fullmatch(r"[0-9a-f]{64}", token_a) and a.digest() not in url_a  # not the bare digest
        assert b"a.example" in (state / token_a / "pip-index").read_bytes()
        assert oct(state.stat().st_mode & 0o777) == "0o700"
        assert _get(url_a + "/pip-index") == 403  # this test is a host process: refused
    for _ in range(50):  # the daemon removes what nobody holds
        if not any(p.is_dir() for p in state.iterdir()):
            break
        time.sleep(0.2)
    assert not any(p.is_dir() for p in state.iterdir())
    # Next time: the same URL for the same settings (the port and the key are kept).
    with settings_server.serve_settings(a) as again:
        assert again == url_a


def test_a_host_process_of_any_user_gets_403(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BUILDER_SETTINGS_PORT", raising=False)
    with settings_server.serve_settings(BuildSettings(pip_index="https://u:tok-403@pypi.corp/simple")) as url:
        assert _get(url + "/pip-index") == 403
        assert _get(url + "/index") == 403
        if os.geteuid() == 0:  # and as another user (nobody)
            port_, path = url.split(":")[2].split("/", 1)
            code = subprocess.run(
                [
                    "bash",
                    "-c",
                    f"exec 3<>/dev/tcp/127.0.0.1/{port_}; "
                    f'printf "GET /{path}/pip-index HTTP/1.0\\r\\n\\r\\n" >&3; head -c 12 <&3',
                ],
                capture_output=True,
                text=True,
                user=65534,
                group=65534,
                cwd="/",
                timeout=30,
            )
            code.stdout = code.stdout.split(" ")[-1]
            assert code.stdout.strip() == "403", code.stderr
        out = _wrapper(url, "true")  # the wrapper on the host gets nothing either
        assert out.returncode != 0 and "cannot read settings" in out.stderr


def test_only_exact_live_paths_are_served(open_server):
    with settings_server.hold(BuildSettings(pip_index="https://x.example/simple")) as (state, name):
        base = f"http://127.0.0.1:{open_server}"
        assert _get(f"{base}/{name}/pip-index") == 200
        other = settings_server.token(state, "0" * 16)
        for path in [
            "/",
            f"/{name}",
            f"/{name}/",
            f"/{name}/index?x=1",
            f"/{name}/index%3Fx",
            f"/{name}/../key",
            f"/{name}/%2e%2e/key",
            "/key",
            "/port",
            f"/{other}/index",
            f"/{name}.lock",
            f"/{name}/index/",
            f"//{name}/index",
            f"/{name.upper()}/index",
            f"/{name}/env",
            "/.builder-settings",
        ]:
            assert _get(base + path) == 404, path
        # A raw request with a fragment (urllib would drop it).
        with socket.create_connection(("127.0.0.1", open_server)) as conn:
            conn.sendall(f"GET /{name}/index#x HTTP/1.0\r\n\r\n".encode())
            assert conn.recv(100).startswith(b"HTTP/1.0 404")


def test_fuzzed_paths_get_nothing_but_the_live_files(open_server):
    with settings_server.hold(BuildSettings(pip_index="https://x.example/simple")) as (_, name):
        live = {f"/{name}/index", f"/{name}/pip-index"}

        @settings(max_examples=300, deadline=None)
        @given(
            path=st.one_of(
                st.text(alphabet="/.%?#abcdef0123456789indexpg-", max_size=80),
                st.sampled_from(sorted(live)).flatmap(
                    lambda p: st.text(alphabet="/.%?#x", max_size=3).map(lambda t: p + t)
                ),
            )
        )
        def check(path):
            request = path if path.startswith("/") else "/" + path
            with socket.create_connection(("127.0.0.1", open_server)) as conn:
                conn.sendall(f"GET {request} HTTP/1.0\r\n\r\n".encode())
                status = conn.recv(100).split(b" ")[1]
            assert (status == b"200") == (request in live or settings_server._PING.fullmatch(request) is not None)

        check()


CONTAINER_ID = "9b6d1b4e65424c16245cc2da710c2c64cb22639a04a6321f35425a28ff17267e"


@pytest.mark.parametrize(
    "text,inside",
    [
        (f"4:memory:/docker/{CONTAINER_ID}\n0::/docker/{CONTAINER_ID}\n", True),
        (f"0::/system.slice/docker-{CONTAINER_ID}.scope\n", True),
        ("9:name=systemd:/\n4:memory:/process_api/106c72cecc82\n0::/\n", False),
        (f"0::/user.slice/user-1000.slice/user@1000.service/docker/{CONTAINER_ID}\n", False),  # a user's own subtree
        (f"0::/docker/{CONTAINER_ID}/child\n", False),
        ("0::/docker/abc\n", False),
        # A RUN step of BuildKit in the engine (as measured on cgroup v1 with the cgroupfs driver)
        (
            "9:name=systemd:/docker/buildkit/qtddqx6mr0wserkedsccvz4mq\n4:memory:/docker/buildkit/qtddqx6mr0wserkedsccvz4mq\n",
            True,
        ),
        ("0::/docker/buildkit/qtddqx6mr0wserkedsccvz4mq/child\n", False),
        ("0::/docker/buildkit/short\n", False),
        ("0::/user.slice/docker/buildkit/qtddqx6mr0wserkedsccvz4mq\n", False),
    ],
)
def test_container_cgroup(text, inside):
    assert settings_server.container_cgroup(text) is inside


def test_the_peer_socket_and_its_owner_are_found_through_proc():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            accepted, _ = listener.accept()
            with accepted:
                inode = settings_server.socket_inode(client.getsockname(), listener.getsockname())
                assert inode == os.fstat(client.fileno()).st_ino
                assert settings_server.socket_owners(inode) == [os.getpid()]
                assert settings_server.peer_in_container(client.getsockname(), listener.getsockname()) is False


def test_a_foreign_server_on_a_fixed_port_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    httpd = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    taken = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(UserError, match=f"port {taken} is taken by something else"):
            with settings_server.serve_settings(BuildSettings(pip_index="https://x.example/simple"), taken):
                pass
        # Without a fixed port, another free port is taken and kept for next time.
        monkeypatch.delenv("BUILDER_SETTINGS_PORT", raising=False)
        state = settings_server.state_dir()
        (state / "port").write_text(str(taken))
        with settings_server.serve_settings(BuildSettings(pip_index="https://x.example/simple")) as url:
            port_used = int(url.split(":")[2].split("/")[0])
            assert port_used != taken and int((state / "port").read_text()) == port_used
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_two_cache_dirs_get_their_own_daemons_and_ports(tmp_path, monkeypatch):
    monkeypatch.delenv("BUILDER_SETTINGS_PORT", raising=False)
    settings_ = BuildSettings(pip_index="https://x.example/simple")
    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "one"))
    with settings_server.serve_settings(settings_) as one:
        monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "two"))
        with settings_server.serve_settings(settings_) as two:
            assert one.split("/")[2] != two.split("/")[2]  # ports differ
            assert one.rsplit("/", 1)[1] != two.rsplit("/", 1)[1]  # so do the keys, hence the tokens
            for url, d in ((one, tmp_path / "one"), (two, tmp_path / "two")):
                port_ = int(url.split(":")[2].split("/")[0])
                assert settings_server._daemon_answers(d / "settings", port_) is True


def test_bad_settings_port_is_one_line(monkeypatch):
    monkeypatch.setenv("BUILDER_SETTINGS_PORT", "80a")
    with pytest.raises(UserError, match="BUILDER_SETTINGS_PORT='80a' is not a TCP port"):
        settings_server.port()


def test_doctor_says_whether_the_container_check_can_work():
    from builder.cli import doctor

    assert doctor.settings_server_check(0).ok
    check = doctor.settings_server_check(1000)
    assert not check.ok and not check.required and "/proc/PID/fd" in check.detail
