"""SBOM, provenance and signatures of a builder image, end to end (the I/O around
sbom.py, provenance.py and signing.py).

- `sbom_of(engine, image)`: made once per image id and kept in the cache directory;
  syft's scan is kept by the image's layers, so a no-op rebuild (a new id: its date
  label) does not scan again.
- `sign_pushed(...)`: after `builder push` has verified the digest, sign that digest and
  attach the SBOM and the provenance as signed attestations.
- `verify(ref, key, ...)`: the signature, then both attestations, then what they say:
  the SBOM lists the framework at the version the catalog names for the image's
  release and variant, and the provenance names its base by digest."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from builder import registry
from builder.core import paths, provenance
from builder.core.errors import UserError
from builder.core.grammar import check_ref
from builder.image.describe import labels_of
from builder.supply_chain import sbom, signing
from builder.supply_chain.signing import VerifyError

if TYPE_CHECKING:
    from builder.engine import Engine
    from builder.plan import PushPlan

LOCKS = "/opt/tensorflow/locks"


def kept_path(image_id: str) -> Path:
    """Where the SBOM of IMAGE_ID is kept."""
    d = paths.cache_dir() / "sbom"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{image_id.removeprefix('sha256:')}.cdx.json"


def sbom_of(engine, image: str) -> dict:
    """IMAGE's SBOM (made by sbom.make, kept per image id); IMAGE must be a builder image
    (its labels are checked before any container of it runs)."""
    image_id = engine.image_id(image)
    if image_id is None:
        raise UserError(f"no image '{image}' in the engine")
    labels_of(engine, image)
    kept = kept_path(image_id)
    return paths.kept_json(kept, lambda: sbom.make(engine, image_id, image, scans=kept.parent / "scans"))


def provenance_of(engine, image: str) -> dict:
    """IMAGE's provenance predicate: its labels, its lock files' digests, its patches."""
    code, out = sbom.run_in(engine, image, ["sh", "-c", f"sha256sum {LOCKS}/*"], f"read {LOCKS}")
    files = dict((path, sha) for sha, path in re.findall(r"^([0-9a-f]{64})\s+(\S+)$", out, re.M)) if code == 0 else {}
    build_info = sbom.read_build_info(engine, image)
    patches = [
        *((build_info.get("extension") or {}).get("patches") or []),
        *(sbom.component_entry(build_info, "horovod").get("patches") or []),
    ]
    return provenance.predicate(engine.image_labels(image), files, patches)


def ready_to_sign(engine: Engine, plan: PushPlan) -> Engine:
    """ENGINE, once what `push --sign` attaches is made, before anything is pushed: the
    image's SBOM (kept, so signing after the push reuses it) and its provenance. An image
    that is not a builder image, or a missing syft, is one line now instead of an unsigned
    image in the registry. Nothing to do without --sign."""
    if plan.sign:
        sbom_of(engine, plan.image)
        provenance_of(engine, plan.image)
    return engine


def run_sbom(connect: Callable[[], Engine], image: str, output: Path | None) -> str | None:
    """`builder sbom`: IMAGE's SBOM as JSON, written to OUTPUT (None returned) or returned.
    The reference and OUTPUT are checked before the engine is asked anything."""
    check_ref(image, "IMAGE", image_id=True)
    if output is not None:
        check_output(output)
    text = json.dumps(sbom_of(connect(), image), indent=2)
    if output is None:
        return text
    try:
        output.write_text(text + "\n")
    except OSError as exc:
        raise UserError(f"-o {output}: cannot write it ({exc.strerror})") from None
    return None


def check_output(path: Path) -> None:
    """`sbom -o PATH`: a file can be written there."""
    import os

    if path.is_dir():
        raise UserError(f"-o {path} is a directory")
    if not path.absolute().parent.is_dir():
        raise UserError(f"-o {path}: {path.absolute().parent} is not a directory")
    if not os.access(path.absolute().parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError(f"-o {path}: not writable")


def sign_pushed(engine, image: str, pinned: str, key: Path, password: str, access: signing.Access) -> None:
    """Sign PINNED (REF@DIGEST, just pushed and read back) and attach IMAGE's SBOM and provenance."""
    doc, prov = sbom_of(engine, image), provenance_of(engine, image)
    with tempfile.TemporaryDirectory(prefix="tfbuilder-attest-") as tmp:
        sbom_file, prov_file = Path(tmp) / "sbom.cdx.json", Path(tmp) / "provenance.json"
        sbom_file.write_text(json.dumps(doc))
        prov_file.write_text(json.dumps(prov))
        signing.sign_and_attest(pinned, key, password, access, sbom_file, prov_file)


def verify(ref: str, key: Path, creds, insecure: bool, catalog) -> list[str]:
    """What was verified, one line each; a VerifyError (exit 1, one line) at the first
    thing that does not check out."""
    # the reference and the key first: no network yet (remote_reference refuses a reference without a registry)
    host = registry.remote_reference(ref, "REF").registry or ""
    signing.check_public_key(key)
    transport = registry.probe(host, insecure, action="read")
    creds = registry.allowed_credentials(transport, creds or registry.config_credentials(host))
    access = signing.Access.to(transport, creds)
    digest = registry.manifest_digest(ref, creds, transport) if "@" not in ref else ref.split("@", 1)[1]
    pinned = f"{ref.split('@', 1)[0]}@{digest}" if "@" in ref else f"{_repo(ref)}@{digest}"
    signing.verify_signature(pinned, key, access)
    lines = [f"signature: {pinned} signed by {key}"]
    [doc, *_] = signing.verify_attestation(pinned, key, signing.SBOM_TYPE, access) or [{}]
    [prov, *_] = signing.verify_attestation(pinned, key, signing.PROVENANCE_TYPE, access) or [{}]
    params = (prov.get("invocation") or {}).get("parameters") or {}
    release, variant = params.get("release", ""), params.get("variant", "")
    try:
        wanted = catalog.get(release).variant(variant)
    except UserError:
        raise VerifyError(
            f"{pinned}: the provenance names release {release!r} variant {variant!r}, which the catalog does not have"
        ) from None
    package = wanted.package or wanted.framework_name.lower()
    found = sbom.versions(doc, package)
    if wanted.framework_version not in found:
        raise VerifyError(
            f"{pinned}: the SBOM lists {package} {', '.join(found) or 'not at all'}, "
            f"the catalog's {release} {variant} is {wanted.framework_version}"
        )
    lines.append(
        f"sbom: signed, {len(doc.get('components') or [])} components, {package} "
        f"{wanted.framework_version} as the catalog's {release} {variant}"
    )
    base, base_digest = provenance.base_of(prov)
    if not base_digest:
        raise VerifyError(f"{pinned}: the provenance names no digest for its base image {base or '(none)'}")
    lines.append(
        f"provenance: signed, built by {(prov.get('builder') or {}).get('id', '?')} from {base}@sha256:{base_digest}"
    )
    return lines


def _repo(ref: str) -> str:
    """REF without its tag (the last ':' after the last '/')."""
    head, _, last = ref.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def verified_text(lines: list[str], ref: str, as_json: bool) -> str:
    """`builder verify`'s output: its lines ("signature: ...", "sbom: ..."), or with --json
    one object keyed by what each line checked."""
    if not as_json:
        return "\n".join(lines)
    return json.dumps(
        {"ref": ref, "verified": True, **{k: v.strip() for k, _, v in (line.partition(":") for line in lines)}},
        indent=2,
    )
