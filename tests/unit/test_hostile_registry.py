"""Hostile registries, realms and caches, with REAL peers
on 127.0.0.1 started by each test: a TLS registry whose token service is plain HTTP, a peer
that sends one byte every half second and never finishes, a token service that answers
tokens no header can carry, and a listener on the port a port above 65535 wraps to.

Every peer is a thread on a loopback socket with bounded loops: it stops itself after a few
seconds, so a client that does not give up cannot hold the suite for long either."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from builder import cache, registry, supply_chain
from builder.cli import main as cli
from builder.core import contract, layer_cache
from builder.core.errors import BuilderError, PushError, UserError
from builder.registry import registry_auth
from builder.supply_chain import signing
from tests.integration.registries import make_ca_and_cert
from tests.unit.test_hostile_input import PUBLIC_KEY, one_line_error

CREDS = registry.Credentials("alice", "pw-hostile-s3cret")
DIGEST = "sha256:" + "ab" * 32
DEADLINE = 2.0  # seconds: the deadline the tests set, so that each takes a few seconds


# --- peers ---------------------------------------------------------------------------------


class Peer:
    """A loopback TCP server: each connection is read once and answered by ANSWER(request)
    (bytes, sent whole), or dribbled one byte every INTERVAL s when DRIBBLE; every connection
    ends after CAP s and the server after LIFE s, whatever the client does."""

    def __init__(
        self,
        answer=None,
        dribble: bytes = b"",
        interval: float = 0.5,
        cap: float = 8.0,
        life: float = 30.0,
        tls: tuple[Path, Path] | None = None,
    ):
        self.answer, self.dribble, self.interval, self.cap = answer, dribble, interval, cap
        self.requests: list[bytes] = []
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.host = f"127.0.0.1:{self.port}"
        self.context = None
        if tls:
            import ssl

            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(str(tls[0]), str(tls[1]))
        self.end = time.monotonic() + life
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set() and time.monotonic() < self.end:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(2)
            if self.context is not None:
                conn = self.context.wrap_socket(conn, server_side=True)
            request = conn.recv(65536)
            self.requests.append(request)
            if self.answer is not None:
                conn.sendall(self.answer(request))
            end = time.monotonic() + self.cap
            for i in range(len(self.dribble)):
                if self.stop.is_set() or time.monotonic() > end:
                    break
                conn.sendall(self.dribble[i : i + 1])
                time.sleep(self.interval)
        except OSError:
            pass  # the client gave up: what the tests want
        finally:
            conn.close()

    def authorizations(self) -> list[bytes]:
        return [line for r in self.requests for line in r.split(b"\r\n") if line.lower().startswith(b"authorization")]

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.thread.join(5)


def http_answer(status: int, headers: dict[str, str], body: bytes = b"") -> bytes:
    head = "".join(
        f"{k}: {v}\r\n" for k, v in {**headers, "Content-Length": str(len(body)), "Connection": "close"}.items()
    )
    return f"HTTP/1.1 {status} X\r\n{head}\r\n".encode("latin-1") + body


SLOW = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 200  # a header that never ends


@pytest.fixture
def peers():
    started: list[Peer] = []

    def start(*args, **kwargs) -> Peer:
        started.append(Peer(*args, **kwargs))
        return started[-1]

    yield start
    for p in started:
        p.close()


@pytest.fixture
def certs_d(tmp_path, monkeypatch):
    """A TLS server certificate for 127.0.0.1 whose CA this machine trusts (certs.d)."""
    ca, cert, key = make_ca_and_cert(tmp_path)
    d = tmp_path / "certs.d"
    d.mkdir()
    monkeypatch.setattr(registry, "CERTS_D", d)
    monkeypatch.setattr(registry.transport, "CERTS_D", d)
    monkeypatch.setattr(signing, "CERTS_D", d)
    monkeypatch.setattr(registry, "config_credentials", lambda host: None)
    return SimpleNamespace(dir=d, ca=ca, cert=cert, key=key)


def trust(certs: SimpleNamespace, host: str) -> None:
    (certs.dir / host).mkdir()
    (certs.dir / host / "ca.crt").write_bytes(certs.ca.read_bytes())


@pytest.fixture
def cosign_never(monkeypatch):
    """cosign must not be started: any start is recorded (and fails the way cosign would)."""
    started: list[list[str]] = []

    def run(args, *a, **k):
        started.append(list(args))
        return subprocess.CompletedProcess(args, 1, "", "Error: cosign was started")

    monkeypatch.setattr(signing, "cosign", lambda: "/usr/bin/cosign")
    monkeypatch.setattr(signing.subprocess, "run", run)
    return started


# --- 1. credentials to a token service over plain HTTP: refused on every path ----------------


def realm_registry(peers, certs, token: Peer) -> Peer:
    """A registry over TLS this machine trusts, naming TOKEN (plain HTTP) as its token service."""
    challenge = f'Bearer realm="http://{token.host}/token",service="reg"'
    reg = peers(answer=lambda r: http_answer(401, {"WWW-Authenticate": challenge}), tls=(certs.cert, certs.key))
    trust(certs, reg.host)
    return reg


@pytest.mark.parametrize("source", ["given", "docker-config"])
def test_verify_refuses_credentials_for_a_plain_http_token_service_before_cosign(
    peers, certs_d, cosign_never, tmp_path, monkeypatch, capsys, source
):
    """cosign would send them as Basic auth to the realm in clear: refused by the same check
    push makes, before cosign starts; nothing reaches the token service."""
    token = peers(answer=lambda r: http_answer(200, {}, b'{"token": "t"}'))
    reg = realm_registry(peers, certs_d, token)
    key = tmp_path / "k.pub"
    key.write_text(PUBLIC_KEY)
    ref = f"{reg.host}/ml/tf@{DIGEST}"
    if source == "given":
        with pytest.raises(UserError) as exc:
            supply_chain.verify(ref, key, CREDS, False, None)
        line = str(exc.value)
    else:
        monkeypatch.setattr(registry, "config_credentials", lambda host: CREDS)
        line = one_line_error(capsys, cli.main(["verify", ref, "--key", str(key)]))
    assert "token service over plain HTTP" in line and "\n" not in line
    assert CREDS.password not in line
    assert cosign_never == [] and token.requests == [] and reg.authorizations() == []


def test_signing_after_a_push_takes_credentials_through_the_same_check(peers, certs_d):
    """run_push's signing and build --push's early check get their credentials from
    allowed_credentials: the realm is checked there, for every caller."""
    token = peers(answer=lambda r: http_answer(200, {}, b'{"token": "t"}'))
    reg = realm_registry(peers, certs_d, token)
    transport = registry.probe(reg.host)
    with pytest.raises(UserError, match="token service over plain HTTP"):
        registry.allowed_credentials(transport, CREDS)
    with pytest.raises(UserError, match="token service over plain HTTP"):
        registry.check_before_build(reg.host, CREDS, False)
    assert registry.allowed_credentials(transport, None) is None  # anonymous: nothing to protect
    assert token.requests == []


def test_a_realm_that_is_no_url_is_refused_for_credentials_in_one_line(peers, certs_d):
    reg = peers(
        answer=lambda r: http_answer(401, {"WWW-Authenticate": 'Bearer realm="https://[::1/token"'}),
        tls=(certs_d.cert, certs_d.key),
    )
    trust(certs_d, reg.host)
    with pytest.raises(UserError) as exc:
        registry.allowed_credentials(registry.probe(reg.host), CREDS)
    assert f"registry {reg.host} names no usable token service" in str(exc.value)


# --- 4. an overall deadline on every request -------------------------------------------------


def elapsed(call) -> tuple[float, BaseException | None, object]:
    start = time.monotonic()
    try:
        result = call()
    except (Exception, BuilderError) as exc:  # noqa: BLE001 - the tests look at what it was
        return time.monotonic() - start, exc, None
    return time.monotonic() - start, None, result


def test_a_registry_that_sends_a_byte_every_half_second_is_given_up_at_the_deadline(peers):
    slow = peers(dribble=SLOW)
    took, exc, _ = elapsed(lambda: registry._send("GET", "http", slow.host, "/v2/", {}, None, False, DEADLINE))
    assert isinstance(exc, OSError) and took < DEADLINE + 1.5, (took, exc)


def test_a_token_service_that_never_finishes_is_given_up_at_the_deadline(peers, monkeypatch):
    monkeypatch.setattr(registry_auth, "REQUEST_DEADLINE", DEADLINE, raising=False)
    slow = peers(dribble=SLOW)
    reg = peers(answer=lambda r: http_answer(401, {"WWW-Authenticate": f'Bearer realm="http://{slow.host}/t"'}))
    transport = registry.Transport(reg.host, "http", False)
    took, exc, _ = elapsed(lambda: registry.served_manifest(f"{reg.host}/ml/tf:1", None, transport))
    assert isinstance(exc, PushError) and took < 2 * DEADLINE + 1.5, (took, exc)
    assert slow.requests  # the realm was asked, and given up on


def test_probe_gives_up_on_a_peer_that_never_finishes(peers, monkeypatch, certs_d):
    """`verify`, `push` and `build --push` start with the probe: it ends, over TLS and plain HTTP."""
    monkeypatch.setattr(registry.transport, "PROBE_DEADLINE", DEADLINE)
    slow = peers(dribble=SLOW)
    took, exc, _ = elapsed(lambda: registry.probe(slow.host, insecure=True))
    assert isinstance(exc, (PushError, UserError)) and took < 2 * DEADLINE + 1.5, (took, exc)


def test_the_compile_cache_probe_gives_up_on_a_peer_that_never_finishes(peers):
    slow = peers(dribble=SLOW)
    took, exc, answered = elapsed(lambda: cache.server._answers(SimpleNamespace(url=f"http://{slow.host}")))
    assert exc is None and answered is False and took < 3.5, (took, exc, answered)


def test_a_deadline_leaves_a_fast_answer_whole(peers):
    body = b"x" * 300_000
    fast = peers(answer=lambda r: http_answer(200, {"Docker-Content-Digest": DIGEST}, body))
    status, headers, data = registry._send("GET", "http", fast.host, "/v2/", {}, None, False, DEADLINE)
    assert status == 200 and data == body and headers["docker-content-digest"] == DIGEST


# --- 5. ports are 1 to 65535 ---------------------------------------------------------------------


def test_a_port_above_65535_reaches_no_server(peers):
    """getaddrinfo takes port 99999 modulo 65536: a listener on the wrapped port gets nothing."""
    listener = peers(answer=lambda r: http_answer(200, {}))
    wrapped = f"127.0.0.1:{listener.port + 65536}"
    took, exc, _ = elapsed(lambda: registry._send("GET", "http", wrapped, "/v2/", {}, None, False, DEADLINE))
    assert isinstance(exc, OSError) and "65535" in str(exc), exc
    time.sleep(0.3)
    assert listener.requests == []


@pytest.mark.parametrize(
    "ref", ["127.0.0.1:99999/ml/tf:1", "r.example:0/ml/tf:1", "[::1]:70000/tf:1", "r.example:" + "9" * 40 + "/tf:1"]
)
def test_a_reference_with_a_port_out_of_range_is_refused(ref):
    assert "a port is 1 to 65535" in (contract.reference_problem(ref) or "")
    with pytest.raises(UserError, match="a port is 1 to 65535"):
        registry.remote_reference(ref, "REF")


@pytest.mark.parametrize(
    "args",
    [
        ["push", "local/tf:1", "--registry", "127.0.0.1:99999/ml"],
        ["push", "127.0.0.1:99999/ml/tf:1"],
        ["verify", "127.0.0.1:99999/ml/tf:1", "--key", "KEY"],
        ["sbom", "127.0.0.1:99999/ml/tf:1"],
        ["build", "--release", "21.08", "-t", "127.0.0.1:65536/ml/tf:1", "--dry-run"],
    ],
    ids=["push-registry", "push-own", "verify", "sbom", "build-tag"],
)
def test_every_command_refuses_a_port_out_of_range_in_one_line(args, tmp_path, capsys, monkeypatch):
    def never(*a, **k):
        pytest.fail("the registry or the engine was asked")

    for name in ("probe", "_send", "session"):
        for module in (registry, registry.transport, registry.manifests):  # wherever it is looked up
            if hasattr(module, name):
                monkeypatch.setattr(module, name, never)
    monkeypatch.setattr(cli, "_engine", never)
    key = tmp_path / "k.pub"
    key.write_text(PUBLIC_KEY)
    line = one_line_error(capsys, cli.main([str(key) if a == "KEY" else a for a in args]))
    assert "a port is 1 to 65535" in line, line


@pytest.mark.parametrize("repo", ["127.0.0.1:99999/cache", "cache.example:0/c", "-x.example:70000/c"])
def test_layer_cache_refuses_a_port_out_of_range(repo):
    with pytest.raises(UserError, match="a port is 1 to 65535"):
        layer_cache.check(repo)
    assert layer_cache.check("cache.example:65535/c") == "cache.example:65535/c"


# --- 10. every value from a token service is checked ------------------------------------------


def token_case(peers, body: bytes, realm: str | None = None) -> tuple[str, BaseException | None, Peer]:
    token = peers(answer=lambda r: http_answer(200, {"Content-Type": "application/json"}, body))
    realm = realm or f"http://{token.host}/token"
    reg = peers(answer=lambda r: http_answer(401, {"WWW-Authenticate": f'Bearer realm="{realm}",service="r"'}))
    transport = registry.Transport(reg.host, "http", False)
    _, exc, _ = elapsed(lambda: registry.served_manifest(f"{reg.host}/ml/tf:1", None, transport))
    return reg.host, exc, token


HOSTILE_TOKENS = {
    "crlf": "tok\r\nX-Injected: 1",
    "non-latin-1": "tok\u20ac\u4e00",
    "nul": "tok\x00en",
    "space": "tok en",
    "huge": "t" * (64 << 10),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TOKENS))
def test_a_token_no_header_can_carry_is_one_line_naming_the_registry_never_the_token(peers, name):
    value = HOSTILE_TOKENS[name]
    host, exc, _ = token_case(peers, json.dumps({"token": value}).encode())
    assert isinstance(exc, (PushError, UserError)), repr(exc)
    message = str(exc)
    assert f"registry {host}" in message and "\n" not in message and value not in message
    assert "tok" not in message.replace("token", "")


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"token": ' * 100_000,
        b"\xff\xfe not json",
        b'["token", "t"]',
        b'{"token": 5}',
        b" " * (2 << 20),
    ],
    ids=["deep-array", "deep-object", "not-utf8", "a-list", "a-number", "2-MiB"],
)
def test_a_token_answer_that_is_no_token_object_is_one_line(peers, body):
    host, exc, _ = token_case(peers, body)
    assert isinstance(exc, PushError) and f"registry {host}" in str(exc) and "\n" not in str(exc), repr(exc)


def test_the_lifetime_of_a_token_is_a_finite_number_of_seconds():
    for doc in (
        {"token": "t", "expires_in": 1e999},
        {"token": "t", "expires_in": "nan"},
        {"token": "t", "expires_in": -5},
        {"token": "t", "expires_in": 10**400},
    ):
        value, lifetime = registry_auth.token_of("r.example", json.dumps(doc).replace("Infinity", "1e999").encode())
        assert value == "t" and 0 < lifetime <= registry_auth.MAX_LIFETIME, (doc, lifetime)


@pytest.mark.parametrize(
    "realm",
    [
        "http://[::1/token",
        "https://127.0.0.1:99999/t",
        "https://user@127.0.0.1/t",
        "ftp://127.0.0.1/t",
        "https:///t",
        "https://h/t\x1b[2J",
    ],
    ids=["bad-ipv6", "port-out-of-range", "userinfo", "ftp", "no-host", "escape"],
)
def test_a_realm_that_is_no_usable_url_is_one_line_naming_the_registry(peers, realm):
    host, exc, token = token_case(peers, b'{"token": "t"}', realm=realm)
    assert isinstance(exc, UserError) and f"registry {host} names no usable token service" in str(exc), repr(exc)
    assert "\x1b" not in str(exc) and token.requests == []


def test_a_registry_digest_that_is_no_sha256_digest_is_refused(peers):
    reg = peers(answer=lambda r: http_answer(200, {"Docker-Content-Digest": "sha256:\x1b[2Jzz"}, b"{}"))
    with pytest.raises(PushError, match="not sha256"):
        registry.served_manifest(f"{reg.host}/ml/tf:1", None, registry.Transport(reg.host, "http", False))


# --- 12. a digest reference is no tag to give an image -------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["build", "--release", "21.08", "-t", f"local/tf@{DIGEST}", "--dry-run"],
        ["build", "--release", "21.08", "-t", f"local/tf:1@{DIGEST}", "--dry-run"],
        ["derive", "--from", "local/tf:1", "-t", f"local/mine@{DIGEST}", "--apt", "curl"],
    ],
    ids=["build", "build-tag-and-digest", "derive"],
)
def test_a_digest_reference_as_a_tag_is_refused_in_the_plan(args, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_engine", lambda: pytest.fail("the engine was reached"))
    line = one_line_error(capsys, cli.main(args))
    assert "has a digest" in line and "--tag" in line, line


def test_the_tag_reference_rule_refuses_digests_only():
    assert contract.tag_reference_problem("local/tf:1") is None
    assert "has a digest" in contract.tag_reference_problem(f"local/tf@{DIGEST}")
    assert contract.tag_reference_problem("Bad Ref") == contract.reference_problem("Bad Ref")
