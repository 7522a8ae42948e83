"""TLS is never downgraded: real local registries (an HTTPS one with a self-signed CA made
by openssl, a plain HTTP one) record every request; a fake engine stands in for dockerd
and, like dockerd, sends whatever credentials it is handed to the registry."""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import threading
from pathlib import Path

import pytest

from builder import registry as reg
from builder.cli import main as cli
from builder.core.errors import UserError
from builder.engine.progress import ProgressMode
from tests.integration.registries import make_ca_and_cert as make_cert
from tests.unit.fake_engine import FakeEngine

OTHER = "sha256:" + "cd" * 32


class Registry:
    """A registry API stub that remembers every request and what it was sent."""

    def __init__(self, tls_files: tuple[Path, Path, Path] | None = None):
        self.requests: list[tuple[str, str, str | None]] = []  # method, path, Authorization
        self.manifests: dict[str, str] = {}
        self.serve_digest: str | None = None  # a registry that serves another digest
        self.read_status: int | None = None  # set: manifests are answered with this status
        self.basic: str | None = None  # set: every path wants exactly this Authorization
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _answer(self, body: bool) -> None:
                outer.requests.append((self.command, self.path, self.headers.get("Authorization")))
                if outer.basic and self.headers.get("Authorization") != outer.basic:
                    self.send_response(401)  # htpasswd auth, as Docker's registry answers it
                    self.send_header("WWW-Authenticate", 'Basic realm="Registry Realm"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path == "/v2/":
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    if body:
                        self.wfile.write(b"{}")
                    return
                if outer.read_status:
                    self.send_response(outer.read_status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                digest = outer.serve_digest or outer.manifests.get(self.path)
                if digest is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                manifest = json.dumps(
                    {
                        "schemaVersion": 2,
                        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip"}] * 2,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Docker-Content-Digest", digest)
                self.send_header("Content-Length", str(len(manifest)))
                self.end_headers()
                if body:
                    self.wfile.write(manifest)

            def do_GET(self):  # noqa: N802
                self._answer(True)

            def do_HEAD(self):  # noqa: N802
                self._answer(False)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.tls = tls_files is not None
        if tls_files:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls_files[1]), str(tls_files[2]))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def authorizations(self) -> list[str]:
        return [a for _, _, a in self.requests if a]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class RegistryEngine(FakeEngine):
    """The fake engine, pushing to the registry stub; like dockerd, it authenticates to the
    registry with what it is given, over the registry's own scheme."""

    def __init__(self, registry: Registry, ca: Path | None):
        super().__init__()
        self.registry, self.ca = registry, ca
        self.add_image("local/img:1")

    def _send_credentials(self, username: str, password: str) -> None:
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        import http.client

        if self.registry.tls:
            conn = http.client.HTTPSConnection(
                self.registry.host,
                context=ssl.create_default_context(cafile=str(self.ca))
                if self.ca
                else ssl._create_unverified_context(),
            )
        else:
            conn = http.client.HTTPConnection(self.registry.host)
        conn.request("GET", "/v2/", headers={"Authorization": f"Basic {token}"})
        conn.getresponse().read()
        conn.close()

    def login(self, username, password, registry):
        super().login(username, password, registry)
        self._send_credentials(username, password)

    def push(self, ref, auth):
        if auth is None:  # docker-py would add the Docker config's credentials
            raise AssertionError("auth=None lets docker-py send the config's credentials")
        if auth.get("username"):
            self._send_credentials(auth["username"], auth["password"])
        yield from super().push(ref, auth)
        name, tag = ref.split("/", 1)[1].rsplit(":", 1)
        self.registry.manifests[f"/v2/{name}/manifests/{tag}"] = self.pushed[ref]


def moves(engine: FakeEngine) -> list[tuple]:
    """The calls that send something or change a tag (questions such as image_id left out)."""
    return [c for c in engine.calls if c[0] in ("login", "tag", "push", "remove_image")]


@pytest.fixture
def certs_d(tmp_path, monkeypatch):
    d = tmp_path / "certs.d"
    d.mkdir()
    monkeypatch.setattr(reg, "CERTS_D", d)
    monkeypatch.setattr(reg.transport, "CERTS_D", d)
    monkeypatch.setattr(reg, "config_credentials", lambda host: None)
    return d


@pytest.fixture
def tls_registry(tmp_path):
    files = make_cert(tmp_path)
    r = Registry(files)
    r.ca = files[0]
    yield r
    r.close()


@pytest.fixture
def plain_registry():
    r = Registry()
    yield r
    r.close()


CREDS = reg.Credentials("alice", "pw-unit-s3cret")


def pusher(registry: Registry, ca: Path | None = None) -> tuple[reg.Pusher, RegistryEngine]:
    engine = RegistryEngine(registry, ca)
    return reg.Pusher(engine, tries=2, backoff=0.01, progress=ProgressMode.QUIET), engine


def test_untrusted_certificate_is_refused_before_anything_is_sent(tls_registry, certs_d):
    p, engine = pusher(tls_registry, tls_registry.ca)
    ref = f"{tls_registry.host}/ml/img:1"
    with pytest.raises(UserError) as exc:
        p.push("local/img:1", ref, CREDS)
    message = str(exc.value)
    assert "does not trust" in message and str(certs_d / tls_registry.host / "ca.crt") in message
    assert "--insecure-registry" in message and "\n" not in message
    assert moves(engine) == []  # no login, no tag, no push
    assert ref not in engine.tags
    assert tls_registry.requests == []  # the handshake failed: not even GET /v2/ arrived


def test_a_ca_in_certs_d_is_trusted_and_the_digest_is_read_back_over_tls(tls_registry, certs_d):
    (certs_d / tls_registry.host).mkdir()
    (certs_d / tls_registry.host / "ca.crt").write_bytes(tls_registry.ca.read_bytes())
    tls_registry.basic = CREDS.basic()
    p, engine = pusher(tls_registry, tls_registry.ca)
    ref = f"{tls_registry.host}/ml/img:1"
    result = p.push("local/img:1", ref, CREDS)
    assert result.digest == engine.pushed[ref]
    assert [c[0] for c in moves(engine)] == ["login", "tag", "push"]
    # The read-back authenticated (over verified TLS) with the user's credentials, once asked.
    assert (
        "GET",
        "/v2/ml/img/manifests/1",
        "Basic " + base64.b64encode(b"alice:pw-unit-s3cret").decode(),
    ) in tls_registry.requests


def test_insecure_registry_with_an_untrusted_certificate_sends_no_credentials(tls_registry, certs_d, monkeypatch):
    p, engine = pusher(tls_registry, None)
    with pytest.raises(UserError, match="credentials are only sent over TLS the engine trusts"):
        p.push("local/img:1", f"{tls_registry.host}/ml/img:1", CREDS, insecure=True)
    assert moves(engine) == [] and tls_registry.authorizations() == []
    # Without credentials of its own, not even the Docker config's are handed over.
    monkeypatch.setattr(reg, "config_credentials", lambda host: CREDS)
    result = p.push("local/img:1", f"{tls_registry.host}/ml/img:1", None, insecure=True)
    assert result.digest == engine.pushed[f"{tls_registry.host}/ml/img:1"]
    assert ("push", f"{tls_registry.host}/ml/img:1", None) in engine.calls  # pushed with no user
    assert tls_registry.authorizations() == []


def test_plain_http_registry_needs_the_flag_and_never_gets_credentials(plain_registry, certs_d, monkeypatch):
    p, engine = pusher(plain_registry)
    ref = f"{plain_registry.host}/img:1"
    with pytest.raises(UserError, match="speaks plain HTTP, not TLS: pass --insecure-registry"):
        p.push("local/img:1", ref, None)
    with pytest.raises(UserError, match="over plain HTTP"):
        p.push("local/img:1", ref, CREDS, insecure=True)
    assert moves(engine) == [] and ref not in engine.tags
    monkeypatch.setattr(reg, "config_credentials", lambda host: CREDS)  # the Docker config has some
    result = p.push("local/img:1", ref, None, insecure=True)
    assert result.digest == engine.pushed[ref] and engine.tags[ref] == engine.tags["local/img:1"]
    assert [c[0] for c in moves(engine)] == ["tag", "push"]  # no login
    assert plain_registry.authorizations() == []  # nothing secret ever arrived over HTTP
    assert any(r[:2] == ("GET", "/v2/img/manifests/1") for r in plain_registry.requests)
    assert result.compression == {"gzip": 2}  # read from the manifest the registry serves


def test_a_failure_after_tagging_takes_the_tag_back(plain_registry, certs_d):
    p, engine = pusher(plain_registry)
    plain_registry.serve_digest = OTHER  # the read-back disagrees: after publishing, still a failure
    ref = f"{plain_registry.host}/img:1"
    with pytest.raises(reg.PushError, match="the registry serves"):
        p.push("local/img:1", ref, None, insecure=True)
    assert ref not in engine.tags and ("remove_image", ref) in engine.calls
    older = engine.add_image(ref)  # an existing tag is put back, not removed
    with pytest.raises(reg.PushError):
        p.push("local/img:1", ref, None, insecure=True)
    assert engine.tags[ref] == older


def test_unreachable_registry_retries_then_fails_with_no_tag(certs_d):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    p, engine = pusher(Registry.__new__(Registry))
    with pytest.raises(reg.PushError, match=r"failed after 2 tries: cannot reach the registry"):
        p.push("local/img:1", f"127.0.0.1:{port}/img:1", CREDS)
    assert moves(engine) == []


def test_cli_untrusted_registry_is_one_line_exit_2(tls_registry, certs_d, monkeypatch, capsys):
    engine = RegistryEngine(tls_registry, None)
    monkeypatch.setattr(cli, "_engine", lambda: engine)
    code = cli.main(["push", "local/img:1", "--registry", tls_registry.host, "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"error: registry {tls_registry.host} presents")
    assert moves(engine) == []


def test_build_push_checks_the_registry_before_building(tls_registry, certs_d, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda: pytest.fail("the build started"))
    code = cli.main(["build", "--release", "21.08", "--push", "--registry", tls_registry.host, "--dry-run"])
    assert code == 2 and "presents a certificate this machine does not trust" in capsys.readouterr().err
    # the same registry named by the tag itself (no --registry): checked before building too
    code = cli.main(["build", "--release", "21.08", "-t", f"{tls_registry.host}/team/tf:1", "--push", "--dry-run"])
    assert code == 2 and "presents a certificate this machine does not trust" in capsys.readouterr().err


def test_a_login_error_the_engine_does_not_name_is_asked_of_the_registry(tls_registry, certs_d):
    """Docker 26, after the registry's 401, retries a loopback registry over plain HTTP and
    reports that attempt ("400 Bad Request"): the registry itself, asked over verified TLS,
    says whether the credentials are wrong."""
    from builder.engine import EngineError

    (certs_d / tls_registry.host).mkdir()
    (certs_d / tls_registry.host / "ca.crt").write_bytes(tls_registry.ca.read_bytes())
    tls_registry.basic = CREDS.basic()
    docker26 = EngineError(f"login attempt to http://{tls_registry.host}/v2/ failed with status: 400 Bad Request")
    p, engine = pusher(tls_registry, tls_registry.ca)
    engine.fail["login"] = docker26
    ref = f"{tls_registry.host}/ml/img:1"
    wrong = reg.Credentials("alice", "not-it")
    with pytest.raises(UserError) as exc:
        p.push("local/img:1", ref, wrong)
    assert str(exc.value) == f"registry {tls_registry.host} refused the credentials for user 'alice'"
    assert ref not in engine.tags
    # Right credentials and the same engine error: the engine's own reason, in one line.
    p, engine = pusher(tls_registry, tls_registry.ca)
    engine.fail["login"] = docker26
    with pytest.raises(UserError) as exc:
        p.push("local/img:1", ref, CREDS)
    assert str(exc.value) == f"cannot log in to {tls_registry.host}: {docker26}"


def test_verify_is_told_to_read_not_to_push(plain_registry):
    with pytest.raises(UserError) as err:
        reg.probe(plain_registry.host, action="read")
    assert "pass --insecure-registry to read from it" in str(err.value) and "push" not in str(err.value)


@pytest.mark.parametrize("status", [503, 401])
def test_a_push_that_cannot_be_read_back_is_published_and_unverified_exit_3(plain_registry, certs_d, status):
    """The engine pushed and the registry took it: never reported as a failed push only."""
    from builder.core.errors import Unverified

    plain_registry.read_status = status
    p, engine = pusher(plain_registry)
    ref = f"{plain_registry.host}/ml/img:1"
    with pytest.raises(Unverified) as exc:
        p.push("local/img:1", ref, None, insecure=True)
    message = str(exc.value)
    assert message.startswith(f"published {ref}@{engine.pushed[ref]} (the engine's digest), but could not read it back")
    assert exc.value.exit_code == 3 and "\n" not in message
    assert engine.tags.get(ref)  # published: the local name stays with what was pushed
