"""Speaking to a registry the way its clients must: the Distribution token protocol and
HTTP Basic, behind one `Session.request`.

Harbor, GitLab, GHCR, Quay, Artifactory, ECR, ACR and Artifact Registry answer a request
without a token with `401` and `WWW-Authenticate: Bearer realm=...,service=...,scope=...`:
the client asks the realm for a token covering the scopes it needs (`repository:NAME:pull`,
`repository:NAME:pull,push`), anonymously or with the user's credentials, and sends it as
`Authorization: Bearer`. A bare Distribution registry with htpasswd answers `Basic`.

Rules kept here, whatever the registry asks:
- credentials travel only over TLS this machine verified: to the registry (Basic) and to
  the token realm (Basic at a GET, or an identity token as the refresh token of the OAuth2
  POST); an `http://` realm, or a registry reached without verification, gets none;
- redirects are never followed (a client that follows them carries Authorization along);
- a token is kept per scope set until shortly before it expires, and a 401 on a kept token
  fetches a fresh one once (it expired during a push);
- every value a peer sends is checked before it is used (the realm: an http(s) URL with a
  host and a port in range; the token: printable ASCII of bounded length; the token's
  JSON: bounded in size and depth), and a bad one is one line naming the registry, never
  the value;
- every request, to a registry, a realm or a cache, ends by an overall deadline
  (`exchange`): a peer that sends a byte now and then cannot hold the client for ever.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import math
import re
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Callable

from builder.core.contract import port_problem
from builder.core.errors import PushError, UserError
from builder.core.redact import register_secret

# (method, scheme, host, path, headers, body) -> (status, lower-cased headers, body)
Send = Callable[[str, str, str, str, dict[str, str], bytes | None], tuple[int, dict[str, str], bytes]]

CLIENT_ID = "tf-image-builder"  # named in the OAuth2 token request, as Docker names itself "docker"
EXPIRY_MARGIN = 10.0  # seconds (at most a quarter of its life): a token this close to expiring is fetched again
DEFAULT_LIFETIME = 60.0  # the protocol's default when the token server names none
_PARAM = re.compile(r'\s*([A-Za-z][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?')
# An overall bound on one request (connect, TLS, request, answer): a per-read timeout alone
# lets a peer that sends a byte every few seconds hold the client for ever.
REQUEST_DEADLINE = 120.0
MAX_TOKEN = 16 << 10  # a token travels in one header line: servers take 8-64 KiB of those
MAX_TOKEN_DOC = 1 << 20  # the token service's JSON answer
MAX_LIFETIME = 24 * 3600.0  # a token kept longer than a day is fetched again anyway
_TOKEN = re.compile(r"[!-~]+")  # visible ASCII: what an HTTP header carries as it is (RFC 9110 token68 and JWTs)


class Deadline:
    """A point in time (monotonic) a request must be done by."""

    def __init__(self, seconds: float):
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; TimeoutError (an OSError, as a socket timeout is) once none are."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no complete answer within {self.seconds:g} s")
        return left


class _DeadlineSocket:
    """A connected socket whose every send and receive waits at most until the deadline
    (http.client reads headers line by line: the bound must be on each read)."""

    def __init__(self, sock: socket.socket, deadline: Deadline):
        self._sock, self._deadline = sock, deadline

    def recv_into(self, buffer, nbytes: int = 0) -> int:
        self._sock.settimeout(self._deadline.left())
        return self._sock.recv_into(buffer, nbytes)

    def sendall(self, data) -> None:
        self._sock.settimeout(self._deadline.left())
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb", *args, **kwargs) -> io.BufferedReader:
        """The response's reader (the real socket's, so that it stays open while read)."""
        return io.BufferedReader(_DeadlineReader(self._sock.makefile("rb", buffering=0), self))

    def close(self) -> None:
        self._sock.close()

    def __getattr__(self, name: str):
        return getattr(self._sock, name)


class _DeadlineReader(io.RawIOBase):
    """A socket's raw reader whose every read waits at most until the deadline."""

    def __init__(self, raw, sock: _DeadlineSocket):
        super().__init__()
        self._raw, self._socket = raw, sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:
        self._socket.settimeout(self._socket._deadline.left())
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineConnection(http.client.HTTPConnection):
    """HTTP with an overall deadline: connect, TLS handshake and every read share it."""

    def __init__(self, host: str, deadline: Deadline, **kwargs):
        super().__init__(host, timeout=deadline.left(), **kwargs)
        self._deadline = deadline
        self._create_connection = self._connect_within

    def _connect_within(self, address, timeout, source_address=None) -> socket.socket:
        sock = socket.create_connection(address, min(timeout, self._deadline.left()), source_address)
        sock.settimeout(self._deadline.left())  # the TLS handshake gets what is left
        return sock

    def connect(self) -> None:
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self._deadline)


class _DeadlineHTTPSConnection(_DeadlineConnection, http.client.HTTPSConnection):
    pass


def exchange(
    method: str,
    scheme: str,
    netloc: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
    context: ssl.SSLContext | None = None,
    deadline: float | None = None,
    limit: int = 4 << 20,
) -> tuple[int, dict[str, str], bytes]:
    """One request, no redirects followed, done within DEADLINE seconds (REQUEST_DEADLINE):
    status, lower-cased headers, at most LIMIT bytes of body. OSError (TimeoutError past
    the deadline) or http.client.HTTPException when it fails."""
    why = port_problem(netloc)  # getaddrinfo would wrap 99999 to 34463
    if why:
        raise OSError(f"{netloc[:80]!r} {why}")
    within = Deadline(REQUEST_DEADLINE if deadline is None else deadline)
    conn: http.client.HTTPConnection
    if scheme == "https":
        conn = _DeadlineHTTPSConnection(netloc, within, context=context)
    else:
        conn = _DeadlineConnection(netloc, within)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read(limit)
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        conn.close()


@dataclass
class Credentials:
    """A user name and password, or an identity token (what `docker login` keeps for ACR
    and similar registries, and what a credential helper returns as user `<token>`)."""

    username: str
    password: str = field(repr=False)
    identity_token: str = field(default="", repr=False)

    def auth_config(self) -> dict:
        """The engine's X-Registry-Auth for a push."""
        if self.identity_token:
            return {"identitytoken": self.identity_token}
        return {"username": self.username, "password": self.password}

    def basic(self) -> str:
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


@dataclass(frozen=True)
class Challenge:
    scheme: str  # "basic" or "bearer" (lower case)
    params: dict[str, str]  # realm, service, scope, error ...


def parse_challenge(header: str) -> Challenge | None:
    """The first challenge of a WWW-Authenticate header (registries send one)."""
    m = re.match(r"\s*([A-Za-z]+)\s*(.*)", header or "", re.S)
    if not m:
        return None
    params, rest = {}, m.group(2)
    while rest.strip():
        p = _PARAM.match(rest)
        if not p:
            break
        value = p.group(2) if p.group(2) is not None else p.group(3)
        params[p.group(1).lower()] = re.sub(r"\\(.)", r"\1", value)
        rest = rest[p.end() :]
    return Challenge(m.group(1).lower(), params)


def scope(repo: str, *actions: str) -> str:
    return f"repository:{repo}:{','.join(actions)}"


@dataclass
class _Token:
    value: str
    expires: float


class Session:
    """Requests to one registry (HOST, SCHEME) with what its 401 asks for. VERIFIED: TLS
    this machine verified, the only way CREDS are sent."""

    def __init__(
        self,
        host: str,
        scheme: str,
        verified: bool,
        creds: Credentials | None,
        send: Send,
        clock: Callable[[], float] = time.monotonic,
    ):
        if creds and not verified:
            raise RuntimeError("credentials over an unverified transport")  # registry.allowed_credentials() prevents it
        self.host, self.scheme, self.verified, self.creds = host, scheme, verified, creds
        self.send, self.clock = send, clock
        self.tokens: dict[tuple[str, ...], _Token] = {}
        self.basic = False  # the registry asked for Basic: sent from then on

    def request(
        self, method: str, path: str, scopes: tuple[str, ...] = (), headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """METHOD PATH on the registry, authorized for SCOPES when it asks; its answer."""
        key = tuple(sorted(set(scopes)))
        answer = self._send(method, path, headers, key)
        fresh = False  # the token sent was fetched for this request
        for _ in range(2):  # a first token (or Basic), then a fresh one when a kept token was refused
            if answer[0] != 401:
                return answer
            challenge = parse_challenge(answer[1].get("www-authenticate", ""))
            if challenge is None:
                return answer
            if challenge.scheme == "basic":
                if self.basic or not self.creds or self.creds.identity_token:
                    return answer  # refused, or nothing to send
                self.basic = True
            elif challenge.scheme == "bearer":
                if fresh:
                    return answer  # a token fresh from the realm is refused: the scope is not granted
                wanted = key + tuple(s for s in challenge.params.get("scope", "").split() if s not in key)
                self.tokens[key] = self._fetch_token(challenge, wanted)
                fresh = True
            else:
                return answer
            answer = self._send(method, path, headers, key)
        return answer

    def _send(
        self, method: str, path: str, headers: dict[str, str] | None, key: tuple[str, ...]
    ) -> tuple[int, dict[str, str], bytes]:
        h = dict(headers or {})
        token = self.tokens.get(key)
        if token and token.expires <= self.clock():
            del self.tokens[key]
            token = None
        if token:
            h["Authorization"] = f"Bearer {token.value}"
        elif self.basic and self.creds:
            h["Authorization"] = self.creds.basic()
        return self.send(method, self.scheme, self.host, path, h, None)

    def _fetch_token(self, challenge: Challenge, scopes: tuple[str, ...]) -> _Token:
        parts = parse_realm(self.host, challenge.params.get("realm", ""))
        # the user's secret goes only to a realm over TLS, and only when the registry's was verified
        creds = self.creds if (parts.scheme == "https" and self.verified) else None
        service = challenge.params.get("service", "")
        query = [("service", service)] if service else []
        if creds and not creds.identity_token:
            query.append(("account", creds.username))  # as docker sends it: some token services key on it
        query += [("scope", s) for s in scopes]
        path = parts.path or "/"
        if creds and creds.identity_token:
            form = urllib.parse.urlencode(
                [
                    ("grant_type", "refresh_token"),
                    ("service", service),
                    ("client_id", CLIENT_ID),
                    ("refresh_token", creds.identity_token),
                    ("scope", " ".join(scopes)),
                ]
            ).encode()
            status, headers, body = self.send(
                "POST", parts.scheme, parts.netloc, path, {"Content-Type": "application/x-www-form-urlencoded"}, form
            )
        else:
            url = path + "?" + urllib.parse.urlencode(query + urllib.parse.parse_qsl(parts.query))
            status, headers, body = self.send(
                "GET", parts.scheme, parts.netloc, url, {"Authorization": creds.basic()} if creds else {}, None
            )
        if status in (401, 403):
            who = (
                f"for user '{creds.username}'"
                if creds and not creds.identity_token
                else "for the identity token"
                if creds
                else "without credentials"
            )
            raise UserError(
                f"the token service of registry {self.host} ({parts.netloc}) refused a token {who}"
                + (": give --username-env/--password-env, --password-stdin or `docker login` it" if not creds else "")
            )
        if status != 200:
            raise TokenError(f"the token service of registry {self.host} answered HTTP {status}")
        value, lifetime = token_of(self.host, body)
        # kept until shortly before it expires; a short-lived token (a few seconds) is still used
        return _Token(value, self.clock() + lifetime - min(EXPIRY_MARGIN, lifetime / 4))


def parse_realm(host: str, realm: str) -> urllib.parse.SplitResult:
    """The token service REALM that registry HOST names, checked before anything is sent to
    it: an http(s) URL of visible ASCII with a host, no user info and a port 1 to 65535.
    A bad one is one line naming the registry (the realm itself, cut and made printable)."""
    shown = repr(realm[:120])
    try:
        parts = urllib.parse.urlsplit(realm) if _TOKEN.fullmatch(realm) and len(realm) <= 2048 else None
        port = parts.port if parts else None  # ValueError when not a number or out of range
    except ValueError:
        parts = port = None
    if parts is None or parts.scheme not in ("https", "http") or not parts.hostname or "@" in parts.netloc or port == 0:
        raise UserError(f"registry {host} names no usable token service (realm {shown})")
    return parts


def token_of(host: str, body: bytes) -> tuple[str, float]:
    """The token and its lifetime in seconds from token service answer BODY, each checked:
    a bounded JSON object (not too deep to parse), a token an HTTP header can carry."""
    no_token = f"the token service of registry {host} sent no token"
    if len(body) > MAX_TOKEN_DOC:
        raise TokenError(f"{no_token}: its answer is over {MAX_TOKEN_DOC >> 10} KiB")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested too deep for the parser
        raise TokenError(f"{no_token}: its answer is not JSON") from None
    value = (doc.get("token") or doc.get("access_token")) if isinstance(doc, dict) else None
    if not isinstance(value, str) or not value:
        raise TokenError(no_token)
    if len(value) > MAX_TOKEN or not _TOKEN.fullmatch(value):
        raise TokenError(
            f"the token service of registry {host} sent a token that is not visible ASCII of at most "
            f"{MAX_TOKEN >> 10} KiB (it cannot travel in a header)"
        )
    register_secret(value)  # never printed, like a password
    try:
        lifetime = float(doc.get("expires_in") or DEFAULT_LIFETIME)
    except (ValueError, TypeError, OverflowError):
        lifetime = DEFAULT_LIFETIME
    if not math.isfinite(lifetime) or lifetime <= 0:
        lifetime = DEFAULT_LIFETIME
    return value, min(lifetime, MAX_LIFETIME)


class TokenError(PushError):
    """The token service failed in a way a retry may mend (5xx, garbage in place of a token)."""

    def __init__(self, message: str):
        super().__init__(message, transient=True)
