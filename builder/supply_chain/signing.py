"""Signatures, SBOM and provenance beside a pushed image, with cosign key pairs.

Why cosign and not GPG simple signing: cosign keeps the signature and the signed
attestations (SBOM, provenance) in the same registry as the image, on any registry (its
tag scheme: `sha256-<digest>.sig`, `.att`), and one public key verifies all three;
simple signing needs a lookaside web server every verifier reaches and signs only the
manifest. Keyless signing needs Fulcio and Rekor, which these machines cannot reach, so
it is key pairs with no transparency log (`--tlog-upload=false` when signing,
`--insecure-ignore-tlog` when verifying: cosign prints that it skips the log).

Secrets never reach argv, logs or layers: the key's password goes to cosign in
COSIGN_PASSWORD (read from the variable the user names), registry credentials in a
private, temporary Docker config (DOCKER_CONFIG)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import ssl
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from builder.core.errors import UserError
from builder.core.paths import CERTS_D
from builder.core.redact import redact
from builder.core.userfiles import MAX_KEY, UserFileError, read_user_bytes, shown

SBOM_TYPE = "cyclonedx"
PROVENANCE_TYPE = "slsaprovenance"
TIMEOUT = 600


class VerifyError(UserError):
    """A signature, SBOM or provenance that does not check out (exit 1: not bad input)."""

    exit_code = 1


@dataclass(frozen=True)
class Access:
    """How cosign reaches the registry: plain HTTP (the test registry on loopback, or
    --insecure-registry) and the credentials, if any (cosign speaks the registry's token
    protocol itself, given them in a Docker config of its own)."""

    plain_http: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    host: str = ""  # the registry the credentials are for (the Docker config's key)
    identity_token: str | None = field(default=None, repr=False)

    @classmethod
    def to(cls, transport, creds) -> Access:
        """Access to the registry behind TRANSPORT (registry.probe) with CREDS (allowed over it)."""
        return cls(
            transport.scheme == "http",
            creds.username if creds else None,
            creds.password if creds else None,
            transport.host,
            creds.identity_token if creds else None,
        )

    def docker_config(self) -> dict | None:
        if self.identity_token:
            return {"auths": {self.host: {"identitytoken": self.identity_token}}}
        if self.username and self.password:
            auth = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            return {"auths": {self.host: {"auth": auth}}}
        return None


def cosign() -> str:
    found = shutil.which("cosign")
    if not found:
        raise UserError("cosign is not installed (bash scripts/setup.sh installs it from Debian 13)")
    return found


@contextmanager
def _environment(access: Access, key_password: str | None = None) -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if k != "COSIGN_PASSWORD"}
    env["COSIGN_YES"] = "true"  # no prompts: we say what is skipped ourselves
    if key_password is not None:
        env["COSIGN_PASSWORD"] = key_password
    with tempfile.TemporaryDirectory(prefix="tfbuilder-cosign-") as tmp:
        os.chmod(tmp, 0o700)
        config = access.docker_config()
        if config:
            (Path(tmp) / "config.json").write_text(json.dumps(config))
            env["DOCKER_CONFIG"] = tmp
        ca = CERTS_D / access.host / "ca.crt"
        if access.host and not access.plain_http and ca.is_file():
            # cosign (Go) trusts the system bundle only: the registry's CA, which the engine
            # trusts from certs.d, is added for it as the builder's own requests add it
            bundle = Path(tmp) / "ca-bundle.crt"
            system = Path(ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")
            bundle.write_bytes((system.read_bytes() if system.is_file() else b"") + b"\n" + ca.read_bytes())
            env["SSL_CERT_FILE"] = str(bundle)
        yield env


def _run(args: list[str], env: dict[str, str], what: str, error=UserError) -> str:
    try:
        out = subprocess.run([cosign(), *args], capture_output=True, text=True, env=env, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise error(f"{what}: cosign did not answer in {TIMEOUT}s") from None
    if out.returncode != 0:
        lines = (
            [ln for ln in out.stderr.strip().splitlines() if ln.startswith(("Error:", "error"))]
            or out.stderr.strip().splitlines()
            or ["no output"]
        )
        raise error(f"{what}: {redact(lines[0]).removeprefix('Error: ')}")
    return out.stdout


def _http_flag(access: Access, verify: bool) -> list[str]:
    if not access.plain_http:
        return []
    return ["--allow-insecure-registry"] if verify else ["--allow-http-registry"]


MAX_PUBLIC_KEY = 64 << 10
PUBLIC_KEY_TYPES = ("PUBLIC KEY", "RSA PUBLIC KEY")  # what cosign's UnmarshalPEMToPublicKey takes
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]{1,64})-----\r?\n(.*?)-----END \1-----", re.S)


def check_public_key(key: Path) -> None:
    """KEY is a public key as cosign reads one: a PEM block (text before it is skipped, as
    Go's pem.Decode does) of type PUBLIC KEY (DER SubjectPublicKeyInfo) or RSA PUBLIC KEY
    (PKCS#1). Checked before any registry is asked; cosign still judges the key itself."""
    data = read_user_bytes(key, "--key", MAX_PUBLIC_KEY)  # a regular file: no fifo, no device, no giant
    block = _PEM_BLOCK.search(data.decode("ascii", "replace"))
    if block is None:
        raise UserError(f"--key {key}: not a PEM public key (a cosign .pub file: -----BEGIN PUBLIC KEY----- ...)")
    kind = block[1]
    if kind not in PUBLIC_KEY_TYPES:
        raise UserError(f"--key {key}: its PEM block is {kind}, not a public key (give the key pair's .pub file)")
    try:
        der = base64.b64decode("".join(block[2].split()), validate=True)
    except ValueError:
        raise UserError(f"--key {key}: the {kind} block is not base64") from None
    if not _is_key_der(der, kind):
        raise UserError(f"--key {key}: the {kind} block is not a DER public key")


def _der_element(data: bytes, pos: int) -> tuple[int, int, int] | None:
    """(tag, content start, content end) of the DER element at POS; None when malformed."""
    if pos + 2 > len(data):
        return None
    tag, length, pos = data[pos], data[pos + 1], pos + 2
    if length & 0x80:
        size = length & 0x7F
        if not 0 < size <= 4 or pos + size > len(data):
            return None
        length, pos = int.from_bytes(data[pos : pos + size], "big"), pos + size
    return (tag, pos, pos + length) if pos + length <= len(data) else None


def _is_key_der(der: bytes, kind: str) -> bool:
    """One SEQUENCE, the whole of DER, of (SEQUENCE algorithm, BIT STRING key) for a
    SubjectPublicKeyInfo or (INTEGER modulus, INTEGER exponent) for PKCS#1."""
    outer = _der_element(der, 0)
    if outer is None or outer[0] != 0x30 or outer[2] != len(der):
        return False
    tags, pos = [], outer[1]
    while pos < outer[2]:
        element = _der_element(der, pos)
        if element is None:
            return False
        tags.append(element[0])
        pos = element[2]
    return tags == ([0x02, 0x02] if kind == "RSA PUBLIC KEY" else [0x30, 0x03])


def check_key(key: Path, password_env: str) -> str:
    """The private key's password (from PASSWORD_ENV), after checking the key file exists."""
    try:
        read_user_bytes(key, "--sign", MAX_KEY)  # what cosign will read: a regular file, not a fifo it would wait on
    except UserFileError as exc:
        if exc.missing:
            raise UserError(f"--sign {shown(key)}: no such key file (cosign generate-key-pair makes one)") from None
        raise
    password = os.environ.get(password_env)
    if password is None:
        raise UserError(
            f"--sign: the key's password is read from ${password_env}, which is not set "
            "(set it, or name another variable with --key-password-env)"
        )
    return password


def unlock(key: Path, password_env: str) -> str:
    """check_key(), then the password tried on the key (`cosign public-key` decrypts it,
    offline): a wrong one is refused before anything is built or uploaded."""
    password = check_key(key, password_env)
    with _environment(Access(), password) as env:
        _run(["public-key", "--key", str(key)], env, f"--sign {key}: the key does not open with ${password_env}")
    return password


def sign_and_attest(ref_at_digest: str, key: Path, password: str, access: Access, sbom: Path, provenance: Path) -> None:
    """Sign the digest, then attach the SBOM and the provenance as signed attestations."""
    with _environment(access, password) as env:
        base = ["--key", str(key), "--tlog-upload=false", *_http_flag(access, verify=False)]
        _run(["sign", *base, ref_at_digest], env, f"signing {ref_at_digest}")
        for kind, path in ((SBOM_TYPE, sbom), (PROVENANCE_TYPE, provenance)):
            _run(
                ["attest", *base, "--type", kind, "--predicate", str(path), ref_at_digest],
                env,
                f"attaching the {kind} attestation to {ref_at_digest}",
            )


def verify_signature(ref: str, pub: Path, access: Access) -> list[dict]:
    """cosign's verified signature payloads for REF (its digest as the registry serves it)."""
    with _environment(access) as env:
        out = _run(
            [
                "verify",
                "--key",
                str(pub),
                "--insecure-ignore-tlog=true",
                *_http_flag(access, verify=True),
                "--output",
                "json",
                ref,
            ],
            env,
            f"{ref}: signature",
            VerifyError,
        )
    return json.loads(out)


def verify_attestation(ref: str, pub: Path, kind: str, access: Access) -> list[dict]:
    """The predicates of REF's attestations of KIND that PUB's key signed."""
    with _environment(access) as env:
        out = _run(
            [
                "verify-attestation",
                "--key",
                str(pub),
                "--insecure-ignore-tlog=true",
                "--type",
                kind,
                *_http_flag(access, verify=True),
                ref,
            ],
            env,
            f"{ref}: {kind} attestation",
            VerifyError,
        )
    predicates = []
    for line in out.splitlines():
        if line.strip():
            envelope = json.loads(line)
            statement = json.loads(base64.b64decode(envelope["payload"]))
            predicates.append(statement.get("predicate") or {})
    return predicates
