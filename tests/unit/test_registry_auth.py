"""The registry token protocol (builder/registry/registry_auth.py) against a scripted registry and
token service: what is sent where, and what never is. The real token registry is in
tests/integration/test_token_registry.py."""

from __future__ import annotations

import base64
import json
import urllib.parse

import pytest

from builder.core.errors import UserError
from builder.core.redact import redact
from builder.registry.registry_auth import Credentials, Session, parse_challenge, scope

HOST = "harbor.example:8443"
REALM = "https://auth.example/service/token"
BEARER = f'Bearer realm="{REALM}",service="harbor-registry"'
ALICE = Credentials("alice", "pw-s3cret")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Fake:
    """A registry that wants a Bearer token granting SCOPES of its token service; the token
    service hands out tokens (anonymous ones only when ANONYMOUS) living LIFETIME seconds."""

    def __init__(
        self,
        grants: dict[str | None, set[str]],
        lifetime: float = 300,
        challenge: str = BEARER,
        token_status: int = 200,
    ) -> None:
        self.grants, self.lifetime, self.challenge, self.token_status = grants, lifetime, challenge, token_status
        self.sent: list[tuple[str, str, str, str, dict, bytes | None]] = []
        self.valid: dict[str, set[str]] = {}  # token -> scopes it grants
        self.revoked: set[str] = set()
        self.n = 0

    def __call__(self, method, scheme, host, path, headers, body):
        self.sent.append((method, scheme, host, path, dict(headers), body))
        if host == "auth.example":
            return self._token(method, path, headers, body)
        auth = headers.get("Authorization", "")
        needed = set(self.wanted(path))
        if self.challenge.startswith("Basic"):
            ok = auth == ALICE.basic()
        else:
            token = auth.removeprefix("Bearer ")
            ok = auth.startswith("Bearer ") and token not in self.revoked and needed <= self.valid.get(token, set())
        if ok:
            return 200, {"docker-content-digest": "sha256:" + "a" * 64}, b"{}"
        return (
            401,
            {"www-authenticate": self.challenge + (f',scope="{" ".join(sorted(needed))}"' if needed else "")},
            b"",
        )

    @staticmethod
    def wanted(path: str) -> list[str]:
        for marker, actions in (("/manifests/", ("pull",)), ("/blobs/uploads/", ("pull", "push"))):
            if path.startswith("/v2/") and marker in path:
                return [scope(path[4 : path.index(marker)], *actions)]
        return []

    def _token(self, method, path, headers, body):
        if method == "POST":
            form = dict(urllib.parse.parse_qsl(body.decode()))
            who = "refresh:" + form["refresh_token"]
            asked = form.get("scope", "").split()
        else:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
            asked = query.get("scope", [])
            auth = headers.get("Authorization")
            who = base64.b64decode(auth.split()[1]).decode().split(":")[0] if auth else None
        if self.token_status != 200 or who not in self.grants:
            return self.token_status if self.token_status != 200 else 401, {}, b""
        self.n += 1
        token = f"tok-{self.n}"
        self.valid[token] = {s for s in asked if s in self.grants[who]}
        return 200, {}, json.dumps({"token": token, "expires_in": self.lifetime}).encode()

    def to_registry(self) -> list[tuple]:
        return [s for s in self.sent if s[2] == HOST]

    def to_realm(self) -> list[tuple]:
        return [s for s in self.sent if s[2] == "auth.example"]


def session(fake: Fake, creds: Credentials | None = None, verified: bool = True, clock=None) -> Session:
    return Session(HOST, "https", verified, creds, fake, clock or Clock())


MANIFEST = "/v2/team/ml/tensorflow/manifests/21.08"
PULL = scope("team/ml/tensorflow", "pull")


def test_challenges_parse_with_quotes_commas_and_escapes():
    c = parse_challenge(
        'Bearer realm="https://a/token",service="reg, one",scope="repository:x:pull,push",error="x\\"y"'
    )
    assert c.scheme == "bearer"
    assert c.params == {
        "realm": "https://a/token",
        "service": "reg, one",
        "scope": "repository:x:pull,push",
        "error": 'x"y',
    }
    assert parse_challenge('Basic realm="Registry Realm"').scheme == "basic"
    assert parse_challenge("") is None


def test_an_anonymous_pull_token_is_fetched_without_credentials_and_sent():
    fake = Fake({None: {PULL}})
    status, headers, _ = session(fake).request("GET", MANIFEST, (PULL,))
    assert status == 200 and headers["docker-content-digest"].startswith("sha256:")
    [(method, scheme, _, path, sent, _)] = fake.to_realm()
    assert (method, scheme) == ("GET", "https") and "Authorization" not in sent
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
    assert query == {"service": ["harbor-registry"], "scope": [PULL]}
    assert fake.to_registry()[-1][4]["Authorization"] == "Bearer tok-1"


def test_the_users_password_goes_to_the_token_service_only_and_the_token_is_kept_per_scope():
    fake = Fake({"alice": {PULL}})
    s = session(fake, ALICE)
    assert s.request("GET", MANIFEST, (PULL,))[0] == 200
    assert s.request("GET", MANIFEST, (PULL,))[0] == 200  # the kept token: no second fetch
    assert len(fake.to_realm()) == 1 and fake.to_realm()[0][4]["Authorization"] == ALICE.basic()
    assert all(ALICE.basic() != r[4].get("Authorization") for r in fake.to_registry())


def test_a_scope_the_token_service_does_not_grant_is_one_fetch_and_the_401_returned():
    fake = Fake({"alice": {PULL}})
    push = scope("other/repo", "pull", "push")
    status, _, _ = session(fake, ALICE).request("POST", "/v2/other/repo/blobs/uploads/", (push,))
    assert status == 401
    assert len(fake.to_realm()) == 1 and len(fake.to_registry()) == 2


def test_an_expired_token_is_fetched_again_once():
    clock, fake = Clock(), Fake({None: {PULL}}, lifetime=60)
    s = session(fake, clock=clock)
    assert s.request("GET", MANIFEST, (PULL,))[0] == 200
    clock.now += 55  # within the margin: fetched again before it is sent
    assert s.request("GET", MANIFEST, (PULL,))[0] == 200
    assert len(fake.to_realm()) == 2
    fake.revoked.add("tok-2")  # the registry stops taking it early (a push longer than its life)
    assert s.request("GET", MANIFEST, (PULL,))[0] == 200
    assert len(fake.to_realm()) == 3 and fake.to_registry()[-1][4]["Authorization"] == "Bearer tok-3"


def test_an_identity_token_is_the_refresh_token_of_an_oauth2_post():
    fake = Fake({"refresh:idtok-1": {PULL}})
    creds = Credentials("<token>", "", "idtok-1")
    assert session(fake, creds).request("GET", MANIFEST, (PULL,))[0] == 200
    [(method, _, _, _, headers, body)] = fake.to_realm()
    form = dict(urllib.parse.parse_qsl(body.decode()))
    assert method == "POST" and "Authorization" not in headers
    assert form["grant_type"] == "refresh_token" and form["scope"] == PULL and form["service"] == "harbor-registry"
    assert creds.auth_config() == {"identitytoken": "idtok-1"}


def test_no_secret_reaches_a_plain_http_realm_or_an_unverified_registry():
    fake = Fake({None: {PULL}}, challenge='Bearer realm="http://auth.example/token",service="r"')
    assert session(fake, ALICE).request("GET", MANIFEST, (PULL,))[0] == 200  # an anonymous token
    assert fake.to_realm()[0][1] == "http" and "Authorization" not in fake.to_realm()[0][4]
    with pytest.raises(RuntimeError):
        Session(HOST, "https", False, ALICE, fake)  # registry.allowed_credentials() never lets it happen


def test_basic_registries_get_the_password_only_after_they_ask():
    fake = Fake({}, challenge='Basic realm="Registry Realm"')
    s = session(fake, ALICE)
    assert s.request("GET", MANIFEST, (PULL,))[0] == 200
    assert [r[4].get("Authorization") for r in fake.to_registry()] == [None, ALICE.basic()]
    assert s.request("GET", MANIFEST, (PULL,))[0] == 200 and fake.to_registry()[-1][4]["Authorization"] == ALICE.basic()
    wrong = Fake({}, challenge='Basic realm="Registry Realm"')
    assert session(wrong, Credentials("alice", "nope")).request("GET", MANIFEST)[0] == 401
    assert len(wrong.to_registry()) == 2  # asked once with it, no loop


def test_a_refused_token_is_one_line_naming_the_user_and_no_secret():
    fake = Fake({"bob": {PULL}})
    with pytest.raises(UserError) as exc:
        session(fake, ALICE).request("GET", MANIFEST, (PULL,))
    assert str(exc.value) == f"the token service of registry {HOST} (auth.example) refused a token for user 'alice'"
    anonymous = Fake({"bob": {PULL}})
    with pytest.raises(UserError, match="without credentials: give --username-env"):
        session(anonymous).request("GET", MANIFEST, (PULL,))


def test_a_token_is_redacted_like_a_password():
    fake = Fake({None: {PULL}})
    session(fake).request("GET", MANIFEST, (PULL,))
    assert "tok-1" not in redact("the registry said: Bearer tok-1 is bad")


def helper_on_path(tmp_path, monkeypatch, user: str, secret: str):
    """docker-credential-unit on PATH, answering `get` with USER and SECRET and logging calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    helper = bin_dir / "docker-credential-unit"
    helper.write_text(
        f'#!/bin/sh\nread server\necho "$1 $server" >> {log}\n'
        f'printf \'%s\' \'{{"ServerURL": "\'$server\'", "Username": "{user}", "Secret": "{secret}"}}\'\n'
    )
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    return log


@pytest.mark.parametrize(
    "config,expected",
    [
        ({"auths": {HOST: {"auth": base64.b64encode(b"carol:pw-carol").decode()}}}, ("carol", "pw-carol", "")),
        ({"auths": {HOST: {"identitytoken": "idtok-from-login"}}}, ("<token>", "", "idtok-from-login")),
        (
            {"credHelpers": {HOST: "unit"}, "auths": {HOST: {"auth": base64.b64encode(b"x:y").decode()}}},
            ("helper-user", "helper-pw", ""),
        ),  # the host's helper before auths
        ({"credsStore": "unit"}, ("helper-user", "helper-pw", "")),
        ({"credHelpers": {"other.example": "unit"}}, None),
    ],
)
def test_credentials_are_resolved_as_docker_resolves_them(tmp_path, monkeypatch, config, expected):
    from builder import engine

    log = helper_on_path(tmp_path, monkeypatch, "helper-user", "helper-pw")
    (tmp_path / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert engine.client_auth(HOST) == expected
    if "credHelpers" in config and expected:
        assert log.read_text() == f"get {HOST}\n"


def test_a_helpers_token_user_is_an_identity_token(tmp_path, monkeypatch):
    from builder import registry

    helper_on_path(tmp_path, monkeypatch, "<token>", "idtok-from-helper")
    (tmp_path / "config.json").write_text(json.dumps({"credHelpers": {HOST: "unit"}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    creds = registry.config_credentials(HOST)
    assert (creds.identity_token, creds.password) == ("idtok-from-helper", "")
    assert "idtok-from-helper" not in repr(creds) and "idtok-from-helper" not in redact("x idtok-from-helper")


def test_a_push_with_credentials_to_a_registry_whose_token_service_is_plain_http_is_refused(monkeypatch):
    """The engine would hand the password to that realm in clear: refused before it gets it,
    from the challenge probe() was answered with (no second request)."""
    from builder import registry

    answers = {"https": 'Bearer realm="http://auth.example/token",service="r"'}
    monkeypatch.setattr(
        registry.transport, "_request", lambda *a, **k: (401, {"www-authenticate": answers["https"]}, b"")
    )
    transport = registry.probe(HOST)
    assert transport == registry.Transport(HOST, "https", True, answers["https"])
    monkeypatch.setattr(registry.transport, "_request", lambda *a, **k: pytest.fail("asked the registry again"))
    with pytest.raises(UserError) as exc:
        registry.check_token_service(transport)
    assert "token service over plain HTTP" in str(exc.value) and "\n" not in str(exc.value)
    registry.check_token_service(registry.Transport(HOST, "https", True, f'Bearer realm="{REALM}",service="r"'))
    registry.check_token_service(registry.Transport(HOST, "https", True))  # a registry that asked for nothing
