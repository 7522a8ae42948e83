"""What built an image, as an SLSA provenance (v0.2) predicate: `cosign attest --type
slsaprovenance` wraps it in an in-toto statement whose subject is the pushed digest.

Everything comes from the image: its labels (written after the read-back: release,
variant, options, the builder's git ref, the base image and its digest) and the digests
of the lock files and patches it carries. `predicate()` is pure; `source_ref()` and
`build_date()` say where and when a build runs (the builder's commit, the time)."""

from __future__ import annotations

import re
import time

from builder.core import version
from builder.core.contract import Label

BUILD_TYPE = "urn:tfbuilder:build:v1"
BASE_DIGEST = "org.opencontainers.image.base.digest"
PARAMETERS = (
    "dev.tfbuilder.release",
    "dev.tfbuilder.variant",
    "dev.tfbuilder.requested-framework",
    "dev.tfbuilder.cuda-compute-capabilities",
    "dev.tfbuilder.xla",
    "dev.tfbuilder.gcp",
    "dev.tfbuilder.hdfs",
    "dev.tfbuilder.env-overrides",
    "dev.tfbuilder.base",
)
SHA256 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")


def predicate(labels: dict[str, str], files: dict[str, str], patches: list[dict]) -> dict:
    """The provenance of an image with LABELS; FILES: path in the image -> sha256 (the
    lock files), PATCHES: [{name, sha256}] applied by nvbuild.sh."""
    materials = []
    base, digest = labels.get(Label.BASE_NAME, ""), SHA256.match(labels.get(BASE_DIGEST, ""))
    if base:
        materials.append({"uri": f"docker-image:{base}", "digest": {"sha256": digest.group(1)} if digest else {}})
    materials += [{"uri": f"file:{path}", "digest": {"sha256": sha}} for path, sha in sorted(files.items())]
    materials += [
        {"uri": f"patch:{p['name']}", "digest": {"sha256": p["sha256"]}}
        for p in patches
        if isinstance(p, dict) and "name" in p and "sha256" in p
    ]
    return {
        "builder": {"id": f"urn:tfbuilder:builder:{labels.get('org.opencontainers.image.revision', 'unknown')}"},
        "buildType": BUILD_TYPE,
        "invocation": {
            "parameters": {k.removeprefix("dev.tfbuilder."): labels.get(k, "") for k in PARAMETERS},
            "environment": {"build_id": labels.get("com.nvidia.build.id", "")},
        },
        "metadata": {
            "buildFinishedOn": labels.get("org.opencontainers.image.created", ""),
            "completeness": {"parameters": True, "environment": False, "materials": bool(digest)},
            "reproducible": False,
        },
        "materials": materials,
    }


def base_of(predicate_doc: dict) -> tuple[str, str]:
    """(base image name, its sha256) as a provenance predicate names them; ("", "") when it does not."""
    for m in predicate_doc.get("materials") or []:
        uri = str(m.get("uri", ""))
        if uri.startswith("docker-image:"):
            return uri.removeprefix("docker-image:"), str((m.get("digest") or {}).get("sha256", ""))
    return "", ""


def source_ref() -> str:
    """The commit the builder comes from: its checkout's (with -dirty when it has uncommitted
    changes), or the one an installed wheel was built from; "unknown" when neither says."""
    return version.source_commit()


def build_date() -> str:
    """BUILD_DATE: when a build starts (its image's org.opencontainers.image.created)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
