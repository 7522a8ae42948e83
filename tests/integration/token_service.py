"""A token service for Debian's docker-registry in token mode, written for the tests: the
Distribution token protocol as Harbor, GitLab and GHCR speak it.

GET /token (anonymous, or a user's password as HTTP Basic) and the OAuth2 POST (password
or refresh-token grant, the latter for identity tokens) answer with an RS256 JWT whose
`x5c` header holds a signing certificate issued by a CA the registry trusts
(`rootcertbundle`), granting what POLICY allows of the scopes asked. Served over TLS with a
certificate from the registry's own CA, as the engine trusts a registry's token service
through the registry's certs.d entry."""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import subprocess
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.x509 import load_pem_x509_certificate

ISSUER = "itest-token-issuer"
SERVICE = "itest-registry"
# (who: a user name, or None for anonymous; repository) -> the actions granted there
Policy = Callable[[str | None, str], set[str]]


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def issue_server_cert(ca_dir: Path, name: str) -> tuple[Path, Path]:
    """A TLS certificate for 127.0.0.1 from the CA in CA_DIR (ca.crt, ca.key)."""
    (ca_dir / f"{name}.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run(
        "openssl",
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(ca_dir / f"{name}.key"),
        "-out",
        str(ca_dir / f"{name}.csr"),
    )
    _run(
        "openssl",
        "x509",
        "-req",
        "-in",
        str(ca_dir / f"{name}.csr"),
        "-CA",
        str(ca_dir / "ca.crt"),
        "-CAkey",
        str(ca_dir / "ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(ca_dir / f"{name}.cnf"),
        "-out",
        str(ca_dir / f"{name}.crt"),
    )
    return ca_dir / f"{name}.crt", ca_dir / f"{name}.key"


def make_signing_chain(d: Path) -> tuple[Path, Path, Path]:
    """The token CA (the registry's rootcertbundle) and a signing certificate it issued:
    (ca.crt, signer.crt, signer.key)."""
    d.mkdir(parents=True, exist_ok=True)
    _run(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=itest token CA",
        "-keyout",
        str(d / "token-ca.key"),
        "-out",
        str(d / "token-ca.crt"),
    )
    _run(
        "openssl",
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=itest token signer",
        "-keyout",
        str(d / "signer.key"),
        "-out",
        str(d / "signer.csr"),
    )
    _run(
        "openssl",
        "x509",
        "-req",
        "-in",
        str(d / "signer.csr"),
        "-CA",
        str(d / "token-ca.crt"),
        "-CAkey",
        str(d / "token-ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        str(d / "signer.crt"),
    )
    return d / "token-ca.crt", d / "signer.crt", d / "signer.key"


@dataclass
class Issued:
    who: str | None
    asked: list[str]
    granted: list[dict]
    grant: str  # "basic", "anonymous", "password", "refresh_token"


@dataclass
class TokenService:
    root: Path
    ca_dir: Path  # the registry's TLS CA (ca.crt, ca.key)
    users: dict[str, str]  # user -> password
    policy: Policy
    refresh_tokens: dict[str, str] = field(default_factory=dict)  # identity token -> user
    lifetimes: dict[str, int] = field(default_factory=dict)  # user -> seconds (default 300)
    tls: bool = True  # False: the token service over plain HTTP (a registry reached without TLS)
    issued: list[Issued] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rootcertbundle, signer_crt, signer_key = make_signing_chain(self.root / "token")
        self._key = serialization.load_pem_private_key(signer_key.read_bytes(), password=None)
        self._x5c = [
            base64.b64encode(
                load_pem_x509_certificate(signer_crt.read_bytes()).public_bytes(serialization.Encoding.DER)
            ).decode()
        ]
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):  # noqa: N802
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                who, grant = outer._basic_user(self.headers.get("Authorization"))
                self._answer(url.path, who, grant, query.get("scope", []), query.get("service", [""])[0])

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                kind = form.get("grant_type")
                if kind == "refresh_token":
                    who = outer.refresh_tokens.get(form.get("refresh_token", ""), False)
                elif kind == "password":
                    user = form.get("username", "")
                    who = user if outer.users.get(user) == form.get("password") else False
                else:
                    who = False
                body_extra = {"refresh_token": form.get("refresh_token")} if kind == "refresh_token" else {}
                self._answer(
                    urllib.parse.urlsplit(self.path).path,
                    who,
                    kind or "?",
                    form.get("scope", "").split(),
                    form.get("service", ""),
                    body_extra,
                )

            def _answer(self, path, who, grant, scopes, service, extra=None):
                if path != "/token" or who is False or service != SERVICE:
                    outer.refused.append(f"{grant}:{who}")
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                token, lifetime = outer._token(who, scopes, grant)
                body = json.dumps(
                    {
                        "token": token,
                        "access_token": token,
                        "expires_in": lifetime,
                        "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        **{k: v for k, v in (extra or {}).items() if v},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls:
            cert, key = issue_server_cert(self.ca_dir, "token-server")
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(cert), str(key))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if self.tls else "http"
        self.realm = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/token"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def _basic_user(self, header: str | None) -> tuple[str | None | bool, str]:
        if not header:
            return None, "anonymous"
        try:
            user, _, password = base64.b64decode(header.split(" ", 1)[1]).decode().partition(":")
        except (ValueError, IndexError):
            return False, "basic"
        return (user if self.users.get(user) == password else False), "basic"

    def _token(self, who: str | None, scopes: list[str], grant: str) -> tuple[str, int]:
        granted = []
        for s in scopes:
            kind, _, rest = s.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind not in ("repository", "registry") or not name:
                continue
            # the registry's own resources (registry:catalog:*) are asked of the policy as "registry:NAME"
            allowed = sorted(set(actions.split(",")) & self.policy(who, name if kind == "repository" else s[:-2]))
            if allowed:
                granted.append({"type": kind, "name": name, "actions": allowed})
        self.issued.append(Issued(who, list(scopes), granted, grant))
        lifetime = self.lifetimes.get(who or "", 300)
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": self._x5c}
        claims = {
            "iss": ISSUER,
            "sub": who or "",
            "aud": SERVICE,
            "exp": now + lifetime,
            "nbf": now - 5,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": granted,
        }
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}", lifetime

    def registry_auth_config(self) -> list[str]:
        """The registry's config.yml lines for token authentication against this service."""
        return [
            "auth:",
            "  token:",
            f"    realm: {self.realm}",
            f"    service: {SERVICE}",
            f"    issuer: {ISSUER}",
            f"    rootcertbundle: {self.rootcertbundle}",
        ]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
