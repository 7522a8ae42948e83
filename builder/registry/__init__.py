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

import http.client
import json
import re
import ssl
import sys
import time
from dataclasses import dataclass, field

from builder import engine as engines
from builder.core import contract, grammar
from builder.core.contract import split_ref
from builder.core.errors import BuildFailure, PushError, Unverified, UserError, register_secret, say
from builder.core.paths import CERTS_D
from builder.engine import Engine, EngineError, Progress, signals_raise
from builder.registry import push_mounts, registry_auth
from builder.registry.registry_auth import Credentials, Session, parse_challenge, scope

TRANSIENT = re.compile(r"connection refused|connection reset|broken pipe|\bEOF\b|i/o timeout|timeout|"
                       r"(?<![\w:.])50[0234](?!\d)|service unavailable|bad gateway|no such host|server gave HTTP response",
                       re.IGNORECASE)
AUTH = re.compile(r"unauthorized|authentication required|no basic auth credentials|denied|insufficient_scope|"
                  r"authorization failed|(?<![\w:.])40[13](?!\d)",
                  re.IGNORECASE)  # a status code, never part of a port or address (127.0.0.1:40113)
# The engine on the containerd image store fetches registry tokens trusting the system CA
# bundle only, not certs.d: a token service with a private CA fails there alone.
TOKEN_TLS = re.compile(r"fetch (?:oauth|anonymous) token.*(?:x509|certificate)", re.IGNORECASE | re.S)
MANIFEST_TYPES = ", ".join([
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
])
# `push --tries`: attempts for transient failures, and the longest wait between two. The
# waits double from BACKOFF (2, 4, 8 ... s) up to BACKOFF_CAP: at most about 5 minutes of
# waiting in all, so a registry that stays down fails the push instead of holding it for days.
MAX_TRIES = 10
BACKOFF = 2.0
BACKOFF_CAP = 60.0
MAX_PASSWORD_LINE = 64 * 1024  # a password (or a registry token) is far shorter


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


def target_ref(image: str, registry: str, tag: str | None) -> str:
    """IMAGE retagged under REGISTRY (HOST[:PORT][/NAMESPACE]); the repository's last
    path component is kept: local/tensorflow:21.08 -> host:5000/ns/tensorflow:21.08."""
    why = contract.registry_problem(registry)
    if why:
        raise UserError(f"--registry {grammar.printable(registry[:255])} {why}")
    repo, image_tag = split_ref(image.split("@")[0])
    name = repo.rsplit("/", 1)[-1]
    final_tag = tag or image_tag
    why = contract.tag_problem(final_tag)
    if why:
        raise UserError(f"--tag {grammar.printable(final_tag)} {why}")
    return f"{registry.rstrip('/')}/{name}:{final_tag}"


def own_ref(image: str, tag: str | None) -> str:
    """Where IMAGE goes without --registry: the registry its own reference names (TAG, when
    given, instead of its tag): host:5000/team/tf:1 -> host:5000/team/tf:TAG."""
    parsed = None if contract.reference_problem(image) else contract.parse_reference(image)
    if parsed is not None and parsed.digest and not tag:
        raise UserError(f"{grammar.printable(image)} is a digest reference: it has no tag to push under; "
                        "give -t TAG")
    if parsed is None or parsed.registry is None:
        raise UserError(f"{grammar.printable(image)} names no registry host: give --registry HOST[:PORT][/NS], "
                        "or tag the image HOST[:PORT]/NAME:TAG first")
    final_tag = tag or parsed.tag or contract.DEFAULT_TAG
    why = contract.tag_problem(final_tag)
    if why:
        raise UserError(f"--tag {grammar.printable(final_tag)} {why}")
    return f"{parsed.name}:{final_tag}"


def registry_host(ref: str) -> str:
    return ref.split("/", 1)[0]


def remote_reference(ref: str, what: str) -> contract.Reference:
    """REF as an image in a registry, checked before the registry is asked: Docker's
    grammar, a registry named (Docker Hub's default is never implied: its first component
    would be looked up as a host), a sha256 digest when it has one."""
    give = "give REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:DIGEST"
    why = contract.reference_problem(ref)
    if why:
        raise UserError(f"{what} {grammar.printable(ref)} {why}: {give}")
    parsed = contract.parse_reference(ref)
    if parsed.registry is None:
        raise UserError(f"{what} {grammar.printable(ref)} names no registry: {give}")
    if parsed.digest and not contract.SHA256_DIGEST.fullmatch(parsed.digest):
        raise UserError(f"{what} {grammar.printable(ref)}: the digest must be sha256:<64 hex digits>")
    return parsed


def credentials_from(username: str | None, username_env: str | None, password_env: str | None,
                     password_stdin: bool) -> Credentials | None:
    import os

    if password_stdin and password_env:
        raise UserError("--password-stdin and --password-env exclude each other")
    user = username or (os.environ.get(username_env) if username_env else None)
    if username_env and not os.environ.get(username_env):
        raise UserError(f"--username-env {username_env}: that variable is not set")
    if password_env:
        if password_env not in os.environ:
            raise UserError(f"--password-env {password_env}: that variable is not set")
        password = os.environ[password_env]
    elif password_stdin:
        line = sys.stdin.readline(MAX_PASSWORD_LINE + 1)  # bounded: a device on stdin is never read to the end
        if len(line) > MAX_PASSWORD_LINE:
            raise UserError(f"--password-stdin: the first line is longer than {MAX_PASSWORD_LINE} characters; "
                            "give the password alone on one line")
        password = line.rstrip("\r\n")
        if not password:
            raise UserError("--password-stdin: nothing on standard input")
    else:
        if user:
            raise UserError("a username needs a password: --password-env NAME or --password-stdin")
        return None
    if not user:
        raise UserError("a password needs a username: --username or --username-env NAME")
    register_secret(password)
    return Credentials(user, password)


def config_credentials(host: str) -> Credentials | None:
    """What the user's Docker config holds for the registry, resolved as docker resolves
    it (credHelpers, credsStore, auths); an identity token is kept as one."""
    found = engines.config_credentials(host)
    if not found:
        return None
    user, secret, token = found
    for value in (secret, token):
        if value:
            register_secret(value)
    return Credentials(user, secret, token)


@dataclass(frozen=True)
class Transport:
    """How the registry is spoken to, found by probe() before anything is pushed."""

    host: str
    scheme: str     # "https" or "http"
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


def _send(method: str, scheme: str, host: str, path: str, headers: dict[str, str], body: bytes | None,
          verify: bool = True, timeout: float | None = None,
          registry: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request, no redirects followed (urllib would carry Authorization along to
    wherever a redirect points, plain HTTP included), done within TIMEOUT seconds in all
    (registry_auth.REQUEST_DEADLINE by default): status, headers, body. REGISTRY: the
    registry whose token service HOST is."""
    context = _ssl_context(host, verify, registry) if scheme == "https" else None
    return registry_auth.exchange(method, scheme, host, path, headers, body, context, timeout, MAX_MANIFEST)


def _request(transport: Transport, method: str, path: str, headers: dict[str, str],
             timeout: float | None = None) -> tuple[int, dict[str, str], bytes]:
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
        raise UserError(f"registry {host} presents a certificate this machine does not trust "
                        f"({exc.verify_message or exc.reason}): put its CA certificate in {CERTS_D / host / 'ca.crt'} "
                        f"(the engine trusts it from there too), or pass --insecure-registry to {action} without "
                        "verification and without credentials") from None
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
        raise UserError(f"registry {host} speaks plain HTTP, not TLS: pass --insecure-registry to {action} "
                        f"{'to' if action == 'push' else 'from'} it "
                        "(credentials are never sent over plain HTTP)")
    return Transport(host, "http", False)


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
        raise UserError(f"credentials are only sent over TLS the engine trusts, and {transport.host} is "
                        f"reached {'over plain HTTP' if transport.scheme == 'http' else 'without verifying its certificate'}: "
                        f"trust its CA in {CERTS_D / transport.host / 'ca.crt'} instead of --insecure-registry")
    return None


def check_before_build(host: str, creds: Credentials | None, insecure: bool) -> None:
    """`build --push`: an untrusted certificate or credentials that could not be sent are
    reported before hours of building; a registry that is down now is the push's to retry."""
    try:
        allowed_credentials(probe(host, insecure), creds)
    except PushError:
        pass


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


def manifest_digest(ref: str, creds: Credentials | None, transport: Transport) -> str:
    """The digest the registry serves for REF's manifest, read the way probe() found."""
    return served_manifest(ref, creds, transport)[0]


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
        raise UserError(f"registry {transport.host} sends clients to a token service over plain HTTP "
                        f"({grammar.printable(realm[:120])}): credentials are only sent over TLS; use it without "
                        "credentials (none given, none in the Docker config) if it allows that, or have its token "
                        "service served over HTTPS")


def served_manifest(ref: str, creds: Credentials | None, transport: Transport) -> tuple[str, bytes]:
    """What the registry serves for REF: its manifest's digest and the manifest itself."""
    host = registry_host(ref)
    path, tag = split_ref(ref[len(host) + 1:])
    try:
        status, response, body = session(transport, creds).request(
            "GET", f"/v2/{path}/manifests/{tag}", (scope(path, "pull"),), {"Accept": MANIFEST_TYPES})
    except (OSError, http.client.HTTPException) as exc:
        raise PushError(f"cannot read {ref} back from the registry: {exc}") from None
    if status in (401, 403):
        if creds:
            who = "the identity token" if creds.identity_token else f"user '{creds.username}'"
            raise UserError(f"registry {host} refuses {who} the pull of {path} (reading {ref} back)")
        if transport.verified:
            raise UserError(f"registry {host} wants credentials to read {ref} back: give --username-env/--password-env, "
                            "--password-stdin or `docker login` it")
        raise UserError(f"registry {host} wants credentials to read {ref} back, and they are only sent "
                        "over TLS the engine trusts")
    if status != 200:
        raise PushError(f"reading {ref} back from the registry failed: HTTP {status}")
    digest = response.get("docker-content-digest", "")
    if not digest:
        raise PushError(f"the registry at {host} sent no Docker-Content-Digest for {ref}")
    if not contract.SHA256_DIGEST.fullmatch(digest):  # it is printed, compared and handed to cosign
        raise PushError(f"the registry at {host} sent a Docker-Content-Digest for {ref} that is not "
                        "sha256:<64 hex digits>")
    return digest, body


def layer_compression(manifest: bytes) -> dict[str, int]:
    """Layers per compression in an image manifest, by their media types' suffixes
    (`...tar.gzip` in Docker's types, `+gzip`/`+zstd` in OCI's; none: uncompressed)."""
    try:
        layers = json.loads(manifest).get("layers") or []
    except (ValueError, AttributeError):
        return {}
    counts: dict[str, int] = {}
    for layer in layers:
        media = layer.get("mediaType") if isinstance(layer, dict) else None
        if not isinstance(media, str):  # not a layer descriptor: nothing to say about it
            continue
        kind = next((c for c in ("zstd", "gzip") if media.endswith((f"+{c}", f".{c}"))), "uncompressed")
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def check_tries(tries: int) -> int:
    """`--tries`: 1 to MAX_TRIES."""
    if not 1 <= tries <= MAX_TRIES:
        raise UserError(f"--tries {tries}: at most {MAX_TRIES} and at least 1 (the waits between tries double "
                        f"from {BACKOFF:.0f} s up to {BACKOFF_CAP:.0f} s)")
    return tries


def backoff_wait(attempt: int, backoff: float = BACKOFF) -> float:
    """Seconds to wait after failed ATTEMPT (1, 2, ...): doubling, never over BACKOFF_CAP."""
    return min(backoff * 2 ** min(attempt - 1, 32), BACKOFF_CAP)


class Pusher:
    def __init__(self, engine: Engine, tries: int = 4, backoff: float = BACKOFF, quiet: bool | str = False):
        self.engine, self.tries, self.backoff, self.quiet = engine, check_tries(tries), backoff, quiet

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
                        raise UserError(f"the engine could not verify the certificate of {registry_host(ref)}'s token "
                                        "service: on the containerd image store dockerd trusts only the system CA "
                                        "bundle for tokens (not certs.d): add the CA to it (update-ca-certificates) "
                                        "and restart dockerd")
                    if AUTH.search(message):
                        raise UserError(f"registry {registry_host(ref)} refused the push of {ref}: "
                                        f"{message.splitlines()[0]}")
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
                    if not progress.quiet:
                        progress.on_step(len([e for e in layers.values() if e["state"]]), len(layers),
                                         f"{layer}: {status.lower()}")
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
        return PushResult(ref, digest, sum(max(e["bytes"], e.get("total", 0)) for e in pushed), len(pushed),
                          len(skipped))

    def push(self, image: str, ref: str, creds: Credentials | None, insecure: bool = False) -> PushResult:
        """Probe the registry (no credentials), log in, tag, push, read the digest back.
        Any failure after the local registry tag was made takes it back."""
        if self.engine.image_id(image) is None:
            raise UserError(f"no image '{image}' in the engine")
        host = registry_host(ref)
        diff_ids = list(self.engine.inspect(image).get("RootFS", {}).get("Layers") or [])
        progress = Progress(f"push {ref}", quiet=self.quiet)
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
                        say(f"push: attempt {attempt} failed ({(str(exc).splitlines() or [''])[0]}); "
                            f"retrying in {wait:.0f}s")
                        time.sleep(wait)
                result.attempts, result.layers_mounted = attempt, mounted
                served, manifest = self._read_back(result, creds, transport)
                if served != result.digest:
                    raise PushError(f"the registry serves {served} for {ref}, but the engine pushed {result.digest}")
                result.compression = layer_compression(manifest)
                push_mounts.record(host, split_ref(ref[len(host) + 1:])[0], manifest, diff_ids)
        except Unverified:
            raise  # published: the registry tag stays what the engine pushed, and so does ours
        except BaseException:
            if tagged:
                self._restore(ref, previous)
            raise
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(result.compression.items()))
        progress.done(f"pushed {result.layers_pushed} layers ({result.bytes_uploaded / 1e6:.1f} MB), "
                      f"{result.layers_skipped} already there"
                      + (f" ({result.layers_mounted} mounted from other repositories)" if result.layers_mounted else "")
                      + "; digest verified" + (f"; layers: {kinds}" if kinds else ""))
        return result

    @staticmethod
    def _read_back(result: PushResult, creds: Credentials | None, transport: Transport) -> tuple[str, bytes]:
        """The served manifest; a push the engine completed but that cannot be read back is
        reported as published and unverified (exit 3), never as a failed push."""
        try:
            return served_manifest(result.ref, creds, transport)
        except (UserError, PushError) as exc:
            raise Unverified(f"published {result.pinned} (the engine's digest), but could not read it back "
                             f"to verify it: {str(exc).splitlines()[0]}") from None

    @staticmethod
    def _mount_known_layers(ref: str, diff_ids: list[str], creds: Credentials | None, transport: Transport) -> int:
        """Mount into REF's repository the layers earlier pushes left in other repositories
        of its registry (the containerd store would upload them again); how many."""
        host = registry_host(ref)
        repo = split_ref(ref[len(host) + 1:])[0]
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
    return json.dumps({"ref": result.ref, "digest": result.digest, "bytes_uploaded": result.bytes_uploaded,
                       "layers_pushed": result.layers_pushed, "layers_skipped": result.layers_skipped,
                       "layers_mounted": result.layers_mounted, "attempts": result.attempts,
                       "layer_compression": result.compression})
