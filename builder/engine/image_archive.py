"""What an image archive (`docker save`, buildx's `type=docker,dest=`) holds, read from the
tar itself: each image's manifest against its config. When an engine refuses to load an
archive, this says whether the archive is at fault or the engine."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

MANIFEST_TYPES = {"application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"}
INDEX_TYPES = {"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}
# The layer types Docker 26's engine unpacks (containerd 1.7's IsLayerType): every OCI layer
# type, and Docker's own tar and gzip ones. A layer of another type drops out of the count
# it checks against the config's diff_ids: "mismatched image rootfs and manifest layers".
# BuildKit writes one such type: zstd in Docker's media types, `rootfs.diff.tar.zstd`.
DOCKER_LAYER_TYPES = {
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
}


def unpackable(media_type: str) -> bool:
    """Whether Docker's engine unpacks a layer of MEDIA_TYPE (a `+suffix` such as +encrypted aside)."""
    return media_type.startswith("application/vnd.oci.image.layer.") or media_type.split("+")[0] in DOCKER_LAYER_TYPES


def blob_path(digest: str) -> str:
    """Where an OCI layout keeps the blob DIGEST (sha256:HEX -> blobs/sha256/HEX)."""
    return "blobs/" + digest.replace(":", "/", 1)


def problems(archive: Path) -> list[str]:
    """What is wrong with ARCHIVE as an OCI layout: a missing or unreadable blob, a manifest
    whose layer count differs from its config's diff_ids, or a layer of a type the engine does
    not unpack (either is the engine's "mismatched image rootfs and manifest layers"); [] for
    a sound archive."""
    try:
        with tarfile.open(archive) as tar:
            members = {m.name.removeprefix("./"): m for m in tar.getmembers() if m.isfile()}

            def read(name: str) -> dict:
                member = members.get(name)
                if member is None:
                    raise LookupError(f"{name} is missing")
                data = tar.extractfile(member)
                return json.loads(data.read()) if data else {}

            def blob(digest: str) -> dict:
                return read(blob_path(digest))

            found: list[str] = []
            pending = list(read("index.json").get("manifests", []))
            seen = 0
            while pending:
                desc = pending.pop()
                kind, digest = desc.get("mediaType", ""), desc.get("digest", "")
                try:
                    doc = blob(digest)
                except LookupError:
                    found.append(f"blob {digest[:19]} ({kind or 'no media type'}) is missing")
                    continue
                if kind in INDEX_TYPES:
                    pending.extend(doc.get("manifests", []))
                    continue
                if kind not in MANIFEST_TYPES:
                    continue  # an attestation or another artifact: not an image
                seen += 1
                layers = doc.get("layers", [])
                config_digest = doc.get("config", {}).get("digest", "")
                try:
                    diff_ids = blob(config_digest).get("rootfs", {}).get("diff_ids", [])
                except LookupError:
                    found.append(f"manifest {digest[:19]}: its config {config_digest[:19]} is missing")
                    continue
                if len(diff_ids) != len(layers):
                    found.append(
                        f"manifest {digest[:19]} lists {len(layers)} layers, its config {len(diff_ids)} diff_ids"
                    )
                odd = [layer.get("mediaType", "") for layer in layers if not unpackable(layer.get("mediaType", ""))]
                if odd:
                    found.append(
                        f"manifest {digest[:19]}: {len(odd)} of its {len(layers)} layers are {odd[0] or 'untyped'}, "
                        "a layer type Docker's engine does not unpack"
                    )
                absent = [
                    layer.get("digest", "") for layer in layers if blob_path(layer.get("digest", "")) not in members
                ]
                if absent:
                    found.append(
                        f"manifest {digest[:19]}: {len(absent)} of its {len(layers)} layers "
                        f"are not in the archive (first {absent[0][:19]})"
                    )
            if not seen:
                found.append("no image manifest in index.json")
            return found
    except (OSError, tarfile.TarError, LookupError, ValueError, AttributeError) as exc:
        return [f"not a readable image archive ({type(exc).__name__}: {str(exc)[:120]})"]
