"""`builder cache serve`: options typed and checked before anything is written; nothing a
user types becomes an nginx directive; writes beyond loopback need the write credential.
The server tests run Debian's real nginx on free ports."""

from __future__ import annotations

import base64
import http.client
import shutil
import socket
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder import cache
from builder.cli import main as cli
from builder.core.errors import UserError

pytestmark = pytest.mark.skipif(
    shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--max-object-size", "1m; } location /x { alias /etc/shadow; } #"], "--max-object-size '1m; } location"),
        (["--max-object-size", "1e9"], "is not a size"),
        (["--max-object-size", "inf"], "is not a size"),
        (["--max-object-size", "0"], "must be positive"),
        (["--max-object-size", "100T"], "is more than 64G"),
        (["--max-size", "nan"], "--max-size 'nan' is not a size"),
        (["--max-size", "20G\n"], "is not a size"),
        (["--port", "0"], "--port 0 is not a TCP port"),
        (["--port", "70000"], "--port 70000 is not a TCP port"),
        (["--listen", "0.0.0.0; allow all"], "is not an IP address"),
        (["--address", "localhost"], "is not an IP address"),
        (
            ["--write-credentials-file", "/nonexistent/creds"],
            "--write-credentials-file /nonexistent/creds: cannot read",
        ),
    ],
)
def test_bad_options_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, args, msg):
    before = snapshot(tmp_path)
    code = cli.main(["cache", "serve", "--dir", str(tmp_path / "c"), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and msg in err[0], err
    assert snapshot(tmp_path) == before


def test_a_file_or_an_unusable_path_as_dir_is_one_line(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("user data\n")
    for d, msg in [
        (f, "is not a directory"),
        (f / "sub", "is not a directory"),
        (tmp_path / "a$HOME", "holds '$'"),
        (tmp_path / "a\nb", "holds '$' or a control character"),
    ]:
        code = cli.main(["cache", "serve", "--dir", str(d)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and msg in err[0], err
    assert f.read_text() == "user data\n" and snapshot(tmp_path) == {"file"}


@settings(max_examples=2000)
@given(st.text(max_size=30))
def test_sizes_fit_the_grammar_or_are_refused(text):
    try:
        value = cache.parse_size(text)
    except UserError as exc:
        assert "\n" not in str(exc).replace("\\n", "")
        return
    assert cache.config.SIZE.fullmatch(text) and value > 0 and isinstance(value, int)
    assert set(text) <= set(string.digits + ".KkMmGgTtiBb")


@settings(max_examples=2000)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=40)
)
def test_nginx_strings_are_one_token_or_refused(text):
    try:
        quoted = cache.nginx_string(text, "--dir")
    except UserError:
        assert any(c == "$" or ord(c) < 0x20 or ord(c) == 0x7F for c in text)
        return
    # One double-quoted token: the only quotes inside are escaped ones.
    inner = quoted[1:-1]
    assert quoted[0] == quoted[-1] == '"'
    assert inner.replace("\\\\", "").replace('\\"', "").count('"') == 0
    assert inner.replace("\\\\", "\\").replace('\\"', '"') == text


def _request(
    host: str, port: int, method: str, path: str, body: bytes = b"", auth: str | None = None, source: str | None = None
) -> int:
    conn = http.client.HTTPConnection(host, port, timeout=10, source_address=(source, 0) if source else None)
    headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    conn.request(method, path, body=body or None, headers=headers)
    status = conn.getresponse().status
    conn.close()
    return status


@pytest.fixture
def served(tmp_path):
    servers = []

    def start(directory: Path, listen: str = "127.0.0.1", creds: Path | None = None) -> cache.CacheServer:
        server = cache.CacheServer.checked(directory, free_port(), listen, "1G", "1M", creds)
        cache.run_server(server, detach=True)
        servers.append(server)
        return server

    yield start
    for server in servers:
        cache.stop(server)


def test_a_hostile_directory_name_stays_one_path_in_nginx_conf(tmp_path, served):
    d = tmp_path / "odd dir; } location /x { alias /etc/shadow; } # \"q\" 's'"
    server = served(d)
    assert _request("127.0.0.1", server.port, "PUT", "/ccache/obj", b"object-bytes") in (201, 204)
    assert (d / "data" / "ccache" / "obj").read_bytes() == b"object-bytes"
    assert _request("127.0.0.1", server.port, "GET", "/x") == 404  # no injected location
    conf = (d / ".server" / "nginx.conf").read_text().splitlines()
    assert [line.strip() for line in conf if line.strip().startswith("location")] == ["location / {"]


def _outside_address() -> str:
    """An address of this machine that is not loopback (the source of a 'remote' client)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.123", 9))
        except OSError:
            pytest.skip("no non-loopback address")
        address = s.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("no non-loopback address")
    return address


def test_beyond_loopback_writes_need_the_credential_and_reads_stay_open(tmp_path, served):
    outside = _outside_address()
    server = served(tmp_path / "c", listen="0.0.0.0")
    creds = (tmp_path / "c" / ".server" / "write-credentials").read_text().strip()
    assert oct((tmp_path / "c" / ".server" / "write-credentials").stat().st_mode & 0o777) == "0o600"
    assert creds.split(":")[1] not in (tmp_path / "c" / ".server" / "htpasswd").read_text()  # hashed
    # This machine's builds (loopback) write without it.
    assert _request("127.0.0.1", server.port, "PUT", "/ccache/a", b"A") in (201, 204)
    # Another client: no credential, no write; with it, a write; reads need nothing.
    assert _request(outside, server.port, "PUT", "/ccache/b", b"B", source=outside) == 401
    assert _request(outside, server.port, "PUT", "/ccache/b", b"B", auth="builder:wrong", source=outside) == 401
    assert _request(outside, server.port, "DELETE", "/ccache/a", source=outside) == 401
    assert not (tmp_path / "c" / "data" / "ccache" / "b").exists()
    assert _request(outside, server.port, "PUT", "/ccache/b", b"B", auth=creds, source=outside) in (201, 204)
    assert _request(outside, server.port, "GET", "/ccache/a", source=outside) == 200


def test_a_given_write_credential_is_used(tmp_path, served):
    outside = _outside_address()
    creds = tmp_path / "creds"
    creds.write_text("ci:c0mpile-cache-pw\n")
    server = served(tmp_path / "c", listen="0.0.0.0", creds=creds)
    assert not (tmp_path / "c" / ".server" / "write-credentials").exists()
    assert _request(outside, server.port, "PUT", "/x", b"X", auth="ci:c0mpile-cache-pw", source=outside) in (201, 204)
    assert _request(outside, server.port, "PUT", "/y", b"Y", auth="builder:c0mpile-cache-pw", source=outside) == 401


def test_loopback_server_has_no_write_auth_and_max_object_size_holds(tmp_path, served):
    server = served(tmp_path / "c")
    assert "auth_basic" not in (tmp_path / "c" / ".server" / "nginx.conf").read_text()
    assert _request("127.0.0.1", server.port, "PUT", "/big", b"x" * (2 << 20)) == 413  # over 1M
    assert cache.CacheServer.load(tmp_path / "c").max_object_size == 1 << 20


def test_nginx_config_check_error_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(cache.server, "nginx_binary", lambda: "/bin/false")
    server = cache.CacheServer.checked(tmp_path / "c", free_port(), "127.0.0.1", "1G", "1M")
    with pytest.raises(UserError, match="nginx refused the configuration"):
        cache.run_server(server)


def test_old_server_json_still_loads(tmp_path):
    (tmp_path / ".server").mkdir()
    (tmp_path / ".server" / "server.json").write_text(
        '{"port": 9, "listen": "127.0.0.1", "max_size": 10, "max_object_size": "512m"}'
    )
    assert cache.CacheServer.load(tmp_path).max_object_size == 512 << 20


IP_ADDR = """1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: eth0    inet 10.1.2.3/24 brd 10.1.2.255 scope global eth0\\       valid_lft forever preferred_lft forever
5: docker0    inet 172.17.0.1/16 brd 172.17.255.255 scope global docker0\\       valid_lft forever
5: docker0    inet6 fe80::42:daff:fe82:fc52/64 scope link \\       valid_lft forever preferred_lft forever
9: br-0123456789ab    inet 172.18.0.1/16 brd 172.18.255.255 scope global br-0123456789ab
11: dockerx    inet 192.168.9.1/24 scope global dockerx"""


@pytest.mark.parametrize(
    "address,subnet",
    [
        ("172.17.0.1", "172.17.0.0/16"),  # docker0: this machine's build containers
        ("172.18.0.1", "172.18.0.0/16"),  # a user-defined Docker network's bridge
        ("10.1.2.3", None),  # the machine's LAN: its neighbours need the credential
        ("192.168.9.1", None),  # a name that only looks like Docker's
        ("127.0.0.1", None),
        ("0.0.0.0", None),
        ("172.17.0.2", None),
    ],
)
def test_only_a_docker_bridges_own_subnet_writes_without_the_credential(address, subnet):
    assert cache.docker_bridge_subnet(address, IP_ADDR) == subnet


def test_a_server_on_docker0_lets_this_machines_containers_write(tmp_path, monkeypatch):
    monkeypatch.setattr(cache.config, "_ip_addr_output", lambda: IP_ADDR)
    conf = cache.CacheServer(tmp_path / "c", 8742, "172.17.0.1").nginx_conf()
    assert "allow 172.17.0.0/16;" in conf and "allow 127.0.0.1;" in conf and "deny all;" in conf
    lan = cache.CacheServer(tmp_path / "c", 8742, "10.1.2.3").nginx_conf()
    assert "allow 10.1.2.3;" in lan and "/16" not in lan and "/24" not in lan
