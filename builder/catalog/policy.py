"""What the catalog allows to be built here, in one line each when it does not: a variant
without a wheel for its base's Python, a release without a runtime image. Pure: plans,
renders and locks ask the same questions here."""

from __future__ import annotations

from builder.catalog import Release, Variant, python_key
from builder.core import grammar

# gpu_wheels components that must all be there for TensorFlow to load every CUDA library
# from NVIDIA's wheels (26.11): then the toolkit is needed only to compile, and the
# release has a runtime image that shares the devel image's Python layers.
RUNTIME_WHEELS = ("cuda_runtime", "cublas", "cufft", "curand", "cusolver", "cusparse", "cudnn")


def cuda_from_wheels(release: Release) -> bool:
    return all(w in release.gpu_wheels for w in RUNTIME_WHEELS)


def release_pythons(release: Release) -> list[str]:
    """The Pythons of the release's bases: the upstream image's and the offline base's."""
    return sorted({release.python, release.offline.python}, key=python_key)


def pythons_for(release: Release, variant: Variant) -> list[str]:
    """The release's Pythons that the variant's framework wheel exists for, sorted."""
    if not variant.package:
        return []
    return [p for p in release_pythons(release) if p in variant.pythons]


def _span(pythons: tuple[str, ...] | list[str]) -> str:
    """'3.5-3.7' for consecutive minor versions, else '3.5, 3.7'."""
    keys = [python_key(p) for p in pythons]
    consecutive = (
        all(len(k) == 2 for k in keys)
        and len({k[0] for k in keys}) == 1
        and [k[1] for k in keys] == list(range(keys[0][1], keys[0][1] + len(keys)))
    )
    if len(pythons) > 2 and consecutive:
        return f"{pythons[0]}-{pythons[-1]}"
    return ", ".join(pythons)


def why_not_buildable(release: Release, variant: Variant, python: str | None = None) -> str | None:
    """Why the variant cannot be built here (at all, or for `python`), in one line; None
    when it can."""
    where = f"release {release.name} variant {variant.name}"
    fw = f"{variant.framework_name} {variant.framework_version}"
    if not variant.package:
        return f"{where}: the catalog names no wheel for {fw} (framework.package), so there is nothing to install"
    ours = release_pythons(release)
    if python is not None and python not in ours:
        bases = f"{release.python} upstream, {release.offline.python} offline"
        return f"{where}: Python {python} is not a Python of this release (its bases: {bases})"
    asked = [python] if python is not None else ours
    if any(p in variant.pythons for p in asked):
        return None
    major_minor = ".".join(variant.framework_version.split(".")[:2])
    how = f"build it from a {variant.framework_name} {major_minor} source tree (--framework-src)"
    if variant.api == 1:
        how += " or on an upstream base with NVIDIA's package index"
    return f"{where}: {fw} has no wheel for Python {' or '.join(asked)} (its wheels: {_span(variant.pythons)}); {how}"


def why_no_runtime_image(release: Release) -> str | None:
    """Why RELEASE has no runtime image: only a release whose every CUDA library TensorFlow
    loads comes from NVIDIA's wheels has one."""
    missing = [w for w in RUNTIME_WHEELS if w not in release.gpu_wheels]
    if missing:
        return (
            f"release {release.name} has no runtime image: TensorFlow loads its {', '.join(missing)} "
            "from the base's CUDA toolkit, not from NVIDIA's wheels (26.11 has them all)"
        )
    return None


def buildable_variants(release: Release) -> tuple[list[Variant], list[tuple[str, str]]]:
    """The variants that can be built here, and (name, reason) for the others."""
    ok, skipped = [], []
    for v in release.variants.values():
        reason = why_not_buildable(release, v)
        if reason:
            skipped.append((v.name, reason))
        else:
            ok.append(v)
    return ok, skipped


# What `--platform` may name (Docker's OS/ARCH form) and which of them a release serves.
# amd64: every release (TensorFlow's x86_64 wheels carry CUDA). arm64 (GH200, GB200): PyPI's
# aarch64 TensorFlow wheels are built without CUDA (measured on 2.21.0:
# tf.test.is_built_with_cuda() is False), so a GPU image for arm64 can only come from a
# TensorFlow source tree, and this builder has no arm64 offline base to compile it on yet.
PLATFORMS = ("linux/amd64", "linux/arm64")
ARM64_WHY = (
    "TensorFlow's aarch64 wheels on PyPI are CPU-only (built without CUDA; measured on 2.21.0), so a GPU "
    "image for arm64 (GH200, GB200) needs TensorFlow compiled from source on an arm64 CUDA base, "
    "which this builder does not build yet"
)


def platforms_served(release: Release) -> dict[str, str | None]:
    """Each platform of PLATFORMS -> None where the release serves it, else why not."""
    return {"linux/amd64": None, "linux/arm64": ARM64_WHY}


def why_not_platform(release: Release, platform: str, tensorflow_tree: bool) -> str | None:
    """--platform P for RELEASE: None when it can build that, else the one-line refusal.
    TENSORFLOW_TREE: --framework-src is a TensorFlow source tree (not the extension)."""
    served = platforms_served(release)
    if platform not in served:  # what THIS release serves, not every platform the builder knows
        ours = [p for p, why in served.items() if why is None]
        others = [p for p, why in served.items() if why is not None]
        refused = f"; {', '.join(others)} refused: --platform {others[0]} says why" if others else ""
        return (
            f"--platform {grammar.printable(platform)}: release {release.name} serves {', '.join(ours) or 'no platform'} only "
            f"(Docker's OS/ARCH form{refused})"
        )
    why = served[platform]
    if why is None:
        return None
    if tensorflow_tree:  # the source path exists for amd64 (nvbuild.sh's hermetic build), not yet on arm64
        return (
            f"--platform {platform}: release {release.name}'s offline base is built for linux/amd64 only "
            "(no arm64 CUDA base is built here yet), so the TensorFlow tree cannot be compiled for arm64 "
            "(docs/guide/tensorflow-from-source.md)"
        )
    return f"--platform {platform}: release {release.name} cannot serve an arm64 GPU: {why}"
