"""Pushing to a private registry, and proving what arrived.

The engine reports push failures inside its progress stream instead of raising, so every chunk
is checked; transient failures (refused or reset connections, 5xx) are retried with
backoff a bounded number of times; afterwards the manifest is read back through the
registry's HTTP API v2 and its digest compared with the one the engine reported.

TLS is never downgraded: before any credential or layer leaves the machine, probe()
asks GET /v2/ over TLS with the engine's trust (system bundle + certs.d). An untrusted
certificate or a plain-HTTP registry is an error (exit 2) unless --insecure-registry
says so explicitly, and then no credentials are sent at all (neither ours nor the Docker
config's): credentials travel only over verified TLS.
Every request (registry, token service) ends by an overall deadline (registry_auth.exchange),
and credentials go only where allowed_credentials() lets them: push, its login, verify
and signing through cosign all take them from there.
Credentials come from the Docker config (and its credential helpers), from environment
variables the user names, or from standard input: never from the command line, and
they are never printed or logged.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

from builder.core.contract import split_ref
from builder.core.errors import BuildFailure, PushError, Unverified, UserError
from builder.core.paths import CERTS_D
from builder.core.terminal import say
from builder.engine import Engine, EngineError, Progress, ProgressMode, signals_raise
from builder.registry import push_mounts
from builder.registry.credentials import MAX_PASSWORD_LINE, config_credentials, credentials_from
from builder.registry.manifests import MANIFEST_TYPES, layer_compression, manifest_digest, served_manifest
from builder.registry.references import own_ref, registry_host, remote_reference, target_ref
from builder.registry.registry_auth import Credentials
from builder.registry.transport import (
    MAX_MANIFEST,
    PROBE_DEADLINE,
    Transport,
    _request,
    _send,
    check_token_service,
    credentials_refused,
    probe,
    session,
)

__all__ = [
    "MAX_PASSWORD_LINE",
    "config_credentials",
    "credentials_from",
    "MANIFEST_TYPES",
    "layer_compression",
    "manifest_digest",
    "served_manifest",
    "own_ref",
    "registry_host",
    "remote_reference",
    "target_ref",
    "MAX_MANIFEST",
    "PROBE_DEADLINE",
    "Transport",
    "_request",
    "_send",
    "check_token_service",
    "credentials_refused",
    "probe",
    "session",
    "PushResult",
    "Pusher",
    "allowed_credentials",
    "check_before_build",
    "check_tries",
    "backoff_wait",
    "write_report",
]

TRANSIENT = re.compile(
    r"connection refused|connection reset|broken pipe|\bEOF\b|i/o timeout|timeout|"
    r"(?<![\w:.])50[0234](?!\d)|service unavailable|bad gateway|no such host|server gave HTTP response",
    re.IGNORECASE,
)
AUTH = re.compile(
    r"unauthorized|authentication required|no basic auth credentials|denied|insufficient_scope|"
    r"authorization failed|(?<![\w:.])40[13](?!\d)",
    re.IGNORECASE,
)  # a status code, never part of a port or address (127.0.0.1:40113)
# The engine on the containerd image store fetches registry tokens trusting the system CA
# bundle only, not certs.d: a token service with a private CA fails there alone.
TOKEN_TLS = re.compile(r"fetch (?:oauth|anonymous) token.*(?:x509|certificate)", re.IGNORECASE | re.S)
# `push --tries`: attempts for transient failures, and the longest wait between two. The
# waits double from BACKOFF (2, 4, 8 ... s) up to BACKOFF_CAP: at most about 5 minutes of
# waiting in all, so a registry that stays down fails the push instead of holding it for days.
MAX_TRIES = 10
BACKOFF = 2.0
BACKOFF_CAP = 60.0


@dataclass
class PushResult:
    ref: str
    digest: str
    bytes_uploaded: int = 0
    layers_pushed: int = 0
    layers_skipped: int = 0
    attempts: int = 1
    compression: dict[str, int] = field(default_factory=dict)  # the served manifest's layers, by compression
    layers_mounted: int = 0  # mounted from another repository before the push (builder/registry/push_mounts.py)

    @property
    def pinned(self) -> str:
        return f"{self.ref}@{self.digest}"


def allowed_credentials(transport: Transport, creds: Credentials | None) -> Credentials | None:
    """The credentials that may travel over TRANSPORT: none unless TLS is verified, and
    none to a registry whose token service would get them in clear (check_token_service).
    Every path that hands credentials on (push and its login, verify and signing through
    cosign, build --push's early check) takes them from here."""
    if transport.verified:
        creds = creds or config_credentials(transport.host)
        if creds:
            check_token_service(transport)
        return creds
    if creds is not None:
        raise UserError(
            f"credentials are only sent over TLS the engine trusts, and {transport.host} is "
            f"reached {'over plain HTTP' if transport.scheme == 'http' else 'without verifying its certificate'}: "
            f"trust its CA in {CERTS_D / transport.host / 'ca.crt'} instead of --insecure-registry"
        )
    return None


def check_before_build(host: str, creds: Credentials | None, insecure: bool) -> None:
    """`build --push`: an untrusted certificate or credentials that could not be sent are
    reported before hours of building; a registry that is down now is the push's to retry."""
    try:
        allowed_credentials(probe(host, insecure), creds)
    except PushError:
        pass


def check_tries(tries: int) -> int:
    """`--tries`: 1 to MAX_TRIES."""
    if not 1 <= tries <= MAX_TRIES:
        raise UserError(
            f"--tries {tries}: at most {MAX_TRIES} and at least 1 (the waits between tries double "
            f"from {BACKOFF:.0f} s up to {BACKOFF_CAP:.0f} s)"
        )
    return tries


def backoff_wait(attempt: int, backoff: float = BACKOFF) -> float:
    """Seconds to wait after failed ATTEMPT (1, 2, ...): doubling, never over BACKOFF_CAP."""
    return min(backoff * 2 ** min(attempt - 1, 32), BACKOFF_CAP)


class Pusher:
    def __init__(
        self, engine: Engine, tries: int = 4, backoff: float = BACKOFF, progress: ProgressMode = ProgressMode.AUTO
    ):
        self.engine, self.tries, self.backoff, self.progress = engine, check_tries(tries), backoff, progress

    def login(self, host: str, creds: Credentials, transport: Transport | None = None) -> None:
        """Fail fast, with one line, on a wrong password (nothing is stored). An identity
        token is not a password: the push carries it to the engine, which trades it."""
        if creds.identity_token:
            return
        try:
            self.engine.login(creds.username, creds.password, host)
        except EngineError as exc:
            text = str(exc)
            if AUTH.search(text) or (transport and credentials_refused(transport, creds)):
                raise UserError(f"registry {host} refused the credentials for user '{creds.username}'") from None
            if TRANSIENT.search(text):
                return  # the push retries and reports connection trouble itself
            raise UserError(f"cannot log in to {host}: {text.splitlines()[0]}") from None

    def _push_once(self, ref: str, creds: Credentials | None, progress: Progress) -> PushResult:
        _, tag = split_ref(ref)
        layers: dict[str, dict] = {}
        digest = ""
        try:
            # {} without credentials, never None: None lets docker-py send the Docker config's own
            stream = self.engine.push(ref, creds.auth_config() if creds else {})
            for chunk in stream:
                progress.on_raw(chunk)  # --progress rawjson
                if "error" in chunk or "errorDetail" in chunk:
                    message = (chunk.get("error") or chunk.get("errorDetail", {}).get("message") or "").strip()
                    if TOKEN_TLS.search(message):
                        raise UserError(
                            f"the engine could not verify the certificate of {registry_host(ref)}'s token "
                            "service: on the containerd image store dockerd trusts only the system CA "
                            "bundle for tokens (not certs.d): add the CA to it (update-ca-certificates) "
                            "and restart dockerd"
                        )
                    if AUTH.search(message):
                        raise UserError(
                            f"registry {registry_host(ref)} refused the push of {ref}: {message.splitlines()[0]}"
                        )
                    raise PushError(message, transient=bool(TRANSIENT.search(message)))
                status, layer = chunk.get("status", ""), chunk.get("id", "")
                aux = chunk.get("aux")
                if isinstance(aux, dict) and aux.get("Digest"):
                    digest = aux["Digest"]
                if not layer or layer == tag:
                    m = re.search(r"digest: (sha256:[0-9a-f]{64})", status)
                    if m:
                        digest = m.group(1)
                    continue
                entry = layers.setdefault(layer, {"bytes": 0, "state": ""})
                if status == "Pushing":
                    detail = chunk.get("progressDetail") or {}
                    entry["bytes"] = max(entry["bytes"], int(detail.get("current") or 0))
                    entry["total"] = int(detail.get("total") or 0)
                elif status in ("Pushed", "Layer already exists", "Mounted from"):
                    entry["state"] = status
                    if not progress.silent:
                        progress.on_step(
                            len([e for e in layers.values() if e["state"]]), len(layers), f"{layer}: {status.lower()}"
                        )
                elif status.startswith("Mounted from"):
                    entry["state"] = "Layer already exists"
        except (UserError, PushError):
            raise
        except Exception as exc:  # connection errors surface as requests/docker exceptions
            raise PushError(f"{type(exc).__name__}: {exc}", transient=True) from None
        if not digest:
            raise PushError(f"the engine reported no digest for {ref}")
        pushed = [e for e in layers.values() if e["state"] == "Pushed"]
        skipped = [e for e in layers.values() if e["state"] == "Layer already exists"]
        return PushResult(
            ref, digest, sum(max(e["bytes"], e.get("total", 0)) for e in pushed), len(pushed), len(skipped)
        )

    def push(self, image: str, ref: str, creds: Credentials | None, insecure: bool = False) -> PushResult:
        """Probe the registry (no credentials), log in, tag, push, read the digest back.
        Any failure after the local registry tag was made takes it back."""
        if self.engine.image_id(image) is None:
            raise UserError(f"no image '{image}' in the engine")
        host = registry_host(ref)
        diff_ids = list(self.engine.inspect(image).get("RootFS", {}).get("Layers") or [])
        progress = Progress(f"push {ref}", mode=self.progress)
        transport: Transport | None = None
        previous, tagged = None, False
        attempt = mounted = 0
        try:
            with signals_raise():
                while True:
                    attempt += 1
                    try:
                        if transport is None:  # before any credential or layer leaves this machine
                            transport = probe(host, insecure)
                            creds = allowed_credentials(transport, creds)  # the token service checked too
                            if creds:
                                self.login(host, creds, transport)
                            mounted = self._mount_known_layers(ref, diff_ids, creds, transport)
                        if not tagged:
                            previous = self.engine.image_id(ref)  # a failed or interrupted push moves no tag
                            self.engine.tag(image, ref)
                            tagged = True
                        result = self._push_once(ref, creds, progress)
                        break
                    except PushError as exc:
                        if not exc.transient or attempt >= self.tries:
                            tries = f" after {attempt} tries" if attempt > 1 else ""
                            raise PushError(f"push of {ref} failed{tries}: {str(exc).splitlines()[0]}") from None
                        wait = backoff_wait(attempt, self.backoff)
                        say(
                            f"push: attempt {attempt} failed ({(str(exc).splitlines() or [''])[0]}); "
                            f"retrying in {wait:.0f}s"
                        )
                        time.sleep(wait)
                result.attempts, result.layers_mounted = attempt, mounted
                served, manifest = self._read_back(result, creds, transport)
                if served != result.digest:
                    raise PushError(f"the registry serves {served} for {ref}, but the engine pushed {result.digest}")
                result.compression = layer_compression(manifest)
                push_mounts.record(host, split_ref(ref[len(host) + 1 :])[0], manifest, diff_ids)
        except Unverified:
            raise  # published: the registry tag stays what the engine pushed, and so does ours
        except BaseException:
            if tagged:
                self._restore(ref, previous)
            raise
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(result.compression.items()))
        progress.done(
            f"pushed {result.layers_pushed} layers ({result.bytes_uploaded / 1e6:.1f} MB), "
            f"{result.layers_skipped} already there"
            + (f" ({result.layers_mounted} mounted from other repositories)" if result.layers_mounted else "")
            + "; digest verified"
            + (f"; layers: {kinds}" if kinds else "")
        )
        return result

    @staticmethod
    def _read_back(result: PushResult, creds: Credentials | None, transport: Transport) -> tuple[str, bytes]:
        """The served manifest; a push the engine completed but that cannot be read back is
        reported as published and unverified (exit 3), never as a failed push."""
        try:
            return served_manifest(result.ref, creds, transport)
        except (UserError, PushError) as exc:
            raise Unverified(
                f"published {result.pinned} (the engine's digest), but could not read it back "
                f"to verify it: {str(exc).splitlines()[0]}"
            ) from None

    @staticmethod
    def _mount_known_layers(ref: str, diff_ids: list[str], creds: Credentials | None, transport: Transport) -> int:
        """Mount into REF's repository the layers earlier pushes left in other repositories
        of its registry (the containerd store would upload them again); how many."""
        host = registry_host(ref)
        repo = split_ref(ref[len(host) + 1 :])[0]
        blobs = push_mounts.sources(host, repo, diff_ids)
        if not blobs:
            return 0
        return push_mounts.mount(session(transport, creds).request, repo, blobs)

    def _restore(self, ref: str, previous: str | None) -> None:
        try:
            if previous:
                self.engine.tag(previous, ref)
            else:
                self.engine.remove_image(ref)
        except (Exception, BuildFailure):  # best effort: the push's own error is the one to report
            pass


def write_report(result: PushResult) -> str:
    return json.dumps(
        {
            "ref": result.ref,
            "digest": result.digest,
            "bytes_uploaded": result.bytes_uploaded,
            "layers_pushed": result.layers_pushed,
            "layers_skipped": result.layers_skipped,
            "layers_mounted": result.layers_mounted,
            "attempts": result.attempts,
            "layer_compression": result.compression,
        }
    )
