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
  fetches a fresh one once (it expired during a push).
"""
from __future__ import annotations

import base64
import json
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Callable

from builder.errors import PushError, UserError, register_secret

# (method, scheme, host, path, headers, body) -> (status, lower-cased headers, body)
Send = Callable[[str, str, str, str, dict[str, str], bytes | None], tuple[int, dict[str, str], bytes]]

CLIENT_ID = "tf-image-builder"   # named in the OAuth2 token request, as Docker names itself "docker"
EXPIRY_MARGIN = 10.0             # seconds (at most a quarter of its life): a token this close to expiring is fetched again
DEFAULT_LIFETIME = 60.0          # the protocol's default when the token server names none
_PARAM = re.compile(r'\s*([A-Za-z][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?')


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
    scheme: str              # "basic" or "bearer" (lower case)
    params: dict[str, str]   # realm, service, scope, error ...


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
        rest = rest[p.end():]
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

    def __init__(self, host: str, scheme: str, verified: bool, creds: Credentials | None, send: Send,
                 clock: Callable[[], float] = time.monotonic):
        if creds and not verified:
            raise RuntimeError("credentials over an unverified transport")  # registry.allowed_credentials() prevents it
        self.host, self.scheme, self.verified, self.creds = host, scheme, verified, creds
        self.send, self.clock = send, clock
        self.tokens: dict[tuple[str, ...], _Token] = {}
        self.basic = False  # the registry asked for Basic: sent from then on

    def request(self, method: str, path: str, scopes: tuple[str, ...] = (),
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
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

    def _send(self, method: str, path: str, headers: dict[str, str] | None,
              key: tuple[str, ...]) -> tuple[int, dict[str, str], bytes]:
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
        realm = challenge.params.get("realm", "")
        parts = urllib.parse.urlsplit(realm)
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise UserError(f"registry {self.host} names no usable token service (realm {realm[:120]!r})")
        # the user's secret goes only to a realm over TLS, and only when the registry's was verified
        creds = self.creds if (parts.scheme == "https" and self.verified) else None
        service = challenge.params.get("service", "")
        query = [("service", service)] if service else []
        if creds and not creds.identity_token:
            query.append(("account", creds.username))  # as docker sends it: some token services key on it
        query += [("scope", s) for s in scopes]
        path = parts.path or "/"
        if creds and creds.identity_token:
            form = urllib.parse.urlencode([("grant_type", "refresh_token"), ("service", service),
                                           ("client_id", CLIENT_ID), ("refresh_token", creds.identity_token),
                                           ("scope", " ".join(scopes))]).encode()
            status, headers, body = self.send("POST", parts.scheme, parts.netloc, path,
                                              {"Content-Type": "application/x-www-form-urlencoded"}, form)
        else:
            url = path + "?" + urllib.parse.urlencode(query + urllib.parse.parse_qsl(parts.query))
            status, headers, body = self.send("GET", parts.scheme, parts.netloc, url,
                                              {"Authorization": creds.basic()} if creds else {}, None)
        if status in (401, 403):
            who = f"for user '{creds.username}'" if creds and not creds.identity_token else \
                "for the identity token" if creds else "without credentials"
            raise UserError(f"the token service of registry {self.host} ({parts.netloc}) refused a token {who}"
                            + (": give --username-env/--password-env, --password-stdin or `docker login` it"
                               if not creds else ""))
        if status != 200:
            raise TokenError(f"the token service of registry {self.host} answered HTTP {status}")
        try:
            doc = json.loads(body)
            value = doc.get("token") or doc.get("access_token")
            lifetime = float(doc.get("expires_in") or DEFAULT_LIFETIME)
        except (ValueError, TypeError, AttributeError):
            raise TokenError(f"the token service of registry {self.host} sent no token") from None
        if not isinstance(value, str) or not value:
            raise TokenError(f"the token service of registry {self.host} sent no token")
        register_secret(value)  # never printed, like a password
        # kept until shortly before it expires; a short-lived token (a few seconds) is still used
        return _Token(value, self.clock() + lifetime - min(EXPIRY_MARGIN, lifetime / 4))


class TokenError(PushError):
    """The token service failed in a way a retry may mend (5xx, garbage in place of a token)."""

    def __init__(self, message: str):
        super().__init__(message, transient=True)
