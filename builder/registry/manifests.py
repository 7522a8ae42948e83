"""What the registry serves for a pushed image: its manifest and digest, read back through
the registry's HTTP API v2, and the compression of its layers."""

from __future__ import annotations

import http.client
import json

from builder.core import contract
from builder.core.contract import split_ref
from builder.core.errors import PushError, UserError
from builder.registry.references import registry_host
from builder.registry.registry_auth import Credentials, scope
from builder.registry.transport import Transport, session

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
    ]
)


def manifest_digest(ref: str, creds: Credentials | None, transport: Transport) -> str:
    """The digest the registry serves for REF's manifest, read the way probe() found."""
    return served_manifest(ref, creds, transport)[0]


def served_manifest(ref: str, creds: Credentials | None, transport: Transport) -> tuple[str, bytes]:
    """What the registry serves for REF: its manifest's digest and the manifest itself."""
    host = registry_host(ref)
    path, tag = split_ref(ref[len(host) + 1 :])
    try:
        status, response, body = session(transport, creds).request(
            "GET", f"/v2/{path}/manifests/{tag}", (scope(path, "pull"),), {"Accept": MANIFEST_TYPES}
        )
    except (OSError, http.client.HTTPException) as exc:
        raise PushError(f"cannot read {ref} back from the registry: {exc}") from None
    if status in (401, 403):
        if creds:
            who = "the identity token" if creds.identity_token else f"user '{creds.username}'"
            raise UserError(f"registry {host} refuses {who} the pull of {path} (reading {ref} back)")
        if transport.verified:
            raise UserError(
                f"registry {host} wants credentials to read {ref} back: give --username-env/--password-env, "
                "--password-stdin or `docker login` it"
            )
        raise UserError(
            f"registry {host} wants credentials to read {ref} back, and they are only sent over TLS the engine trusts"
        )
    if status != 200:
        raise PushError(f"reading {ref} back from the registry failed: HTTP {status}")
    digest = response.get("docker-content-digest", "")
    if not digest:
        raise PushError(f"the registry at {host} sent no Docker-Content-Digest for {ref}")
    if not contract.SHA256_DIGEST.fullmatch(digest):  # it is printed, compared and handed to cosign
        raise PushError(
            f"the registry at {host} sent a Docker-Content-Digest for {ref} that is not sha256:<64 hex digits>"
        )
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
