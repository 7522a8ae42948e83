"""How the registry is reached: probe() finds TLS the engine trusts (the system bundle and
certs.d) or, only with --insecure-registry, TLS without verification or plain HTTP; every
request goes through _send (no redirects, an overall deadline), and a token service over
plain HTTP is refused before credentials could reach it."""

from __future__ import annotations

import http.client
import ssl
from dataclasses import dataclass

from builder.core import grammar
from builder.core.errors import PushError, UserError
from builder.core.paths import CERTS_D
from builder.registry import registry_auth
from builder.registry.registry_auth import Credentials, Session, parse_challenge


@dataclass(frozen=True)
class Transport:
    """How the registry is spoken to, found by probe() before anything is pushed."""

    host: str
    scheme: str  # "https" or "http"
    verified: bool  # TLS with a certificate the engine trusts: the only way credentials travel
    challenge: str = ""  # what GET /v2/ answered in WWW-Authenticate over verified TLS (a 401's)


def _ssl_context(host: str, verify: bool = True, registry: str | None = None) -> ssl.SSLContext:
    """Trust what the engine trusts for this registry: the system bundle plus
    /etc/docker/certs.d/HOST/ca.crt (and its client certificate, when there is one). For
    REGISTRY's token service at HOST, the registry's CA as well, as the engine trusts it."""
    context = ssl.create_default_context()
    d = CERTS_D / host
    for ca in {d / "ca.crt", CERTS_D / (registry or host) / "ca.crt"}:
        if ca.is_file():
            context.load_verify_locations(cafile=str(ca))
    if (d / "client.cert").is_file() and (d / "client.key").is_file():
        context.load_cert_chain(str(d / "client.cert"), str(d / "client.key"))
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


MAX_MANIFEST = 4 << 20  # registries refuse larger manifests (Distribution's limit)
PROBE_DEADLINE = 15.0  # seconds for GET /v2/ in all: probe() asks before anything is sent


def _send(
    method: str,
    scheme: str,
    host: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
    verify: bool = True,
    timeout: float | None = None,
    registry: str | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request, no redirects followed (urllib would carry Authorization along to
    wherever a redirect points, plain HTTP included), done within TIMEOUT seconds in all
    (registry_auth.REQUEST_DEADLINE by default): status, headers, body. REGISTRY: the
    registry whose token service HOST is."""
    context = _ssl_context(host, verify, registry) if scheme == "https" else None
    return registry_auth.exchange(method, scheme, host, path, headers, body, context, timeout, MAX_MANIFEST)


def _request(
    transport: Transport, method: str, path: str, headers: dict[str, str], timeout: float | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One request to the registry itself, with no authorization of ours."""
    return _send(method, transport.scheme, transport.host, path, headers, None, transport.verified, timeout)


def session(transport: Transport, creds: Credentials | None) -> Session:
    """Requests to the registry with the authorization it asks for (registry_auth.py): its
    token service is verified as strictly as the registry was reached."""

    def send(method: str, scheme: str, host: str, path: str, headers: dict[str, str], body: bytes | None):
        return _send(method, scheme, host, path, headers, body, transport.verified, registry=transport.host)

    return Session(transport.host, transport.scheme, transport.verified, creds, send)


def probe(host: str, insecure: bool = False, action: str = "push") -> Transport:
    """Find how HOST is reached, sending no credentials: TLS the engine trusts, or (only
    with --insecure-registry) TLS without verification or plain HTTP. An untrusted
    certificate or a plain-HTTP registry without the flag is the user's to fix (exit 2);
    ACTION (push, read) says what the flag would let them do."""
    try:
        status, headers, _ = _request(Transport(host, "https", True), "GET", "/v2/", {}, timeout=PROBE_DEADLINE)
        return Transport(host, "https", True, headers.get("www-authenticate", "") if status == 401 else "")
    except ssl.SSLCertVerificationError as exc:
        if insecure:
            return Transport(host, "https", False)
        raise UserError(
            f"registry {host} presents a certificate this machine does not trust "
            f"({exc.verify_message or exc.reason}): put its CA certificate in {CERTS_D / host / 'ca.crt'} "
            f"(the engine trusts it from there too), or pass --insecure-registry to {action} without "
            "verification and without credentials"
        ) from None
    except ssl.SSLError as exc:
        tls_error = exc  # perhaps no TLS at all: plain HTTP is asked below, without credentials
    except (OSError, http.client.HTTPException) as exc:
        raise PushError(f"cannot reach the registry at {host}: {exc}", transient=True) from None
    try:
        status, _, _ = _request(Transport(host, "http", False), "GET", "/v2/", {}, timeout=PROBE_DEADLINE)
    except (OSError, http.client.HTTPException):
        status = 0
    if status in (0, 400):  # a TLS server that refused the handshake (Go's answers plain HTTP with 400)
        raise UserError(f"the TLS handshake with registry {host} failed: {tls_error}")
    if not insecure:
        raise UserError(
            f"registry {host} speaks plain HTTP, not TLS: pass --insecure-registry to {action} "
            f"{'to' if action == 'push' else 'from'} it "
            "(credentials are never sent over plain HTTP)"
        )
    return Transport(host, "http", False)


def credentials_refused(transport: Transport, creds: Credentials) -> bool:
    """Does the registry itself (or its token service) refuse CREDS? Over verified TLS only.
    Asked when the engine's login fails with a reason it does not name: Docker 26 falls
    back to plain HTTP on a loopback registry after the 401 and reports that attempt's
    "400 Bad Request"."""
    if not transport.verified:
        return False
    try:
        status, _, _ = session(transport, creds).request("GET", "/v2/")
    except UserError:
        return True  # the token service refused them
    except (OSError, http.client.HTTPException, PushError):
        return False
    return status == 401


def check_token_service(transport: Transport) -> None:
    """The engine and cosign hand the credentials to whatever token service the registry
    names (in the challenge probe() was answered with): one over plain HTTP would get them
    in clear, so they are refused before either is given them; so is a realm that is not a
    usable URL (registry_auth.parse_realm)."""
    challenge = parse_challenge(transport.challenge)
    if not challenge or challenge.scheme != "bearer":
        return
    realm = challenge.params.get("realm", "")
    if registry_auth.parse_realm(transport.host, realm).scheme != "https":
        raise UserError(
            f"registry {transport.host} sends clients to a token service over plain HTTP "
            f"({grammar.printable(realm[:120])}): credentials are only sent over TLS; use it without "
            "credentials (none given, none in the Docker config) if it allows that, or have its token "
            "service served over HTTPS"
        )
