"""Docker's registry (Debian's docker-registry) run by the tests on loopback: plain HTTP,
or htpasswd authentication over TLS from a CA the tests create, which the engine trusts
through /etc/docker/certs.d."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import bcrypt

REGISTRY = "/usr/bin/docker-registry"
CERTS_D = Path("/etc/docker/certs.d")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_ca_and_cert(d: Path) -> tuple[Path, Path, Path]:
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
    run(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=itest registry CA",
        "-keyout",
        str(d / "ca.key"),
        "-out",
        str(d / "ca.crt"),
    )
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run(
        "openssl",
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(d / "server.key"),
        "-out",
        str(d / "server.csr"),
    )
    run(
        "openssl",
        "x509",
        "-req",
        "-in",
        str(d / "server.csr"),
        "-CA",
        str(d / "ca.crt"),
        "-CAkey",
        str(d / "ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(d / "san.cnf"),
        "-out",
        str(d / "server.crt"),
    )
    return d / "ca.crt", d / "server.crt", d / "server.key"


class Registry:
    def __init__(
        self,
        root: Path,
        tls: bool = False,
        user: str | None = None,
        password: str | None = None,
        storage: Path | None = None,
        token: dict | None = None,
    ):
        """`storage` shared between two Registry objects makes them two front ends of one
        registry (say a plain in-cluster endpoint and an authenticated TLS one). `token`:
        the registry in token mode, with a token service of the tests (token_service.py)
        made with these arguments (users, policy, ...), over TLS when the registry is."""
        self.root, self.tls, self.user, self.password = root, tls, user, password
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.storage = storage or root / "storage"
        self.proc: subprocess.Popen | None = None
        lines = [
            "version: 0.1",
            "log: {level: warn}",
            "storage:",
            f"  filesystem: {{rootdirectory: {self.storage}}}",
            "  delete: {enabled: true}",
            "http:",
            f"  addr: {self.host}",
        ]
        if tls:
            self.ca, cert, key = make_ca_and_cert(root)
            lines += ["  tls:", f"    certificate: {cert}", f"    key: {key}"]
            trust = CERTS_D / self.host
            trust.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.ca, trust / "ca.crt")
        self.token_service = None
        if token is not None:
            from .token_service import TokenService

            self.token_service = TokenService(root / "token-service", root, tls=tls, **token)
            lines += self.token_service.registry_auth_config()
        if user:
            hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
            (root / "htpasswd").write_text(f"{user}:{hashed}\n")
            lines += ["auth:", "  htpasswd:", "    realm: itest", f"    path: {root / 'htpasswd'}"]
        (root / "config.yml").write_text("\n".join(lines) + "\n")

    def start(self) -> Registry:
        self.proc = subprocess.Popen(
            [REGISTRY, "serve", str(self.root / "config.yml")],
            stdout=open(self.root / "registry.log", "ab"),
            stderr=subprocess.STDOUT,
        )
        scheme = "https" if self.tls else "http"
        context = ssl.create_default_context(cafile=str(self.ca)) if self.tls else None
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{scheme}://{self.host}/v2/", timeout=1, context=context)
                return self
            except urllib.error.HTTPError:
                return self  # 401 from an authenticating registry: it is up
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"registry on {self.host} did not start: {(self.root / 'registry.log').read_text()[-500:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def cleanup(self) -> None:
        """Stop the registry, forget its CA, delete what it stored (a copy of the release
        image each: the run's disk peak), and remove the local tags pushes made under its
        host (HOST/NS/NAME:TAG): a run leaves no image names behind, only shared layers."""
        self.stop()
        if self.token_service:
            self.token_service.stop()
        shutil.rmtree(CERTS_D / self.host, ignore_errors=True)
        shutil.rmtree(self.storage, ignore_errors=True)  # shared storage: whichever front end stops first
        listed = subprocess.run(
            ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True, text=True
        )
        tags = [t for t in listed.stdout.split() if t.startswith(f"{self.host}/")]
        if tags:
            subprocess.run(["docker", "rmi", *tags], capture_output=True)


@contextmanager
def token_registry(root: Path, users: dict[str, str], policy, **service_kw):
    """A TLS registry in token mode with its token service (token_service.py), both
    trusted by the engine and the builder through certs.d: yields (registry, service)."""
    reg = Registry(root, tls=True, token={"users": users, "policy": policy, **service_kw})
    try:
        yield reg.start(), reg.token_service
    finally:
        reg.cleanup()


def anyone_may_push(who: str | None, name: str) -> set[str]:
    """A registry in token mode that hands everyone pull and push tokens (and its catalog),
    as some in-house registries do: the token conversation without credentials."""
    return {"pull", "push", "*"}


ANONYMOUS_TOKENS = {"users": {}, "policy": anyone_may_push}


@contextmanager
def running(root: Path, **kw) -> Iterator[Registry]:
    """A started registry under ROOT (Registry's options), cleaned up afterwards."""
    reg = Registry(root, **kw).start()
    try:
        yield reg
    finally:
        reg.cleanup()


def api(
    reg: Registry,
    path: str,
    scope: str = "",
    accept: str = "application/json",
    method: str = "GET",
    headers: dict[str, str] | None = None,
):
    """GET (or METHOD) /v2/PATH of a plain-HTTP registry, as a client of its own would:
    with an anonymous token for SCOPE where it is in token mode. The response (a context)."""
    import json

    url = f"http://{reg.host}/v2/{path}"
    h = {"Accept": accept, **(headers or {})}
    if reg.token_service:
        from .token_service import SERVICE

        query = urllib.parse.urlencode([("service", SERVICE), ("scope", scope)])
        with urllib.request.urlopen(f"{reg.token_service.realm}?{query}", timeout=30) as r:
            h["Authorization"] = f"Bearer {json.load(r)['token']}"
    return urllib.request.urlopen(urllib.request.Request(url, headers=h, method=method), timeout=30)


def registry_manifest(reg: Registry, name: str, tag: str) -> dict:
    """The manifest a plain-HTTP registry serves (Docker's or OCI's types), read through its API."""
    import json

    with api(
        reg,
        f"{name}/manifests/{tag}",
        f"repository:{name}:pull",
        ", ".join(
            ["application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"]
        ),
    ) as r:
        return json.load(r)
