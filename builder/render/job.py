"""What to build, as data: an `ImageJob` names its build context, build arguments, layer
cache key, the expectation its read-back must meet and the references to tag. Plans make
jobs (plan.py, derive.job, the offline base's recipe); image.produce carries any of them
out the same way. Pure: nothing here reads the engine or writes a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Union

if TYPE_CHECKING:
    from builder.catalog import Release, Variant
    from builder.render import Rendered


@dataclass(frozen=True)
class RenderedContext:
    """A release variant's rendered files, plus the framework source copied next to them."""

    rendered: Rendered
    framework_src: Path | None = None


@dataclass(frozen=True)
class FilesContext:
    """A context of TEXTS (relative path -> text), COPIES (relative path -> one of the
    builder's own files) and BLOBS (relative path -> bytes read once from a user's file,
    so a file swapped after its check is never what the build gets)."""

    texts: Mapping[str, str]
    copies: Mapping[str, Path] = field(default_factory=dict)
    blobs: Mapping[str, bytes] = field(default_factory=dict)


Context = Union["RenderedContext", "FilesContext"]


@dataclass(frozen=True)
class Expectation:
    """What the read-back of a built image must find: the catalog's release and variant,
    the capabilities and toggles requested. EXTENSION: whether the extension must be there.
    RUNTIME: the image must hold no compiler toolchain; DEVEL_IMAGE: the devel image a
    runtime image was built beside (its extension library must be the same file, its
    coverage label is copied: a runtime image has no cuobjdump to list its own).
    CONFORMANCE: the derived images' conformance suite runs against the labelled image.
    COMPONENTS: the components (builder/components/) it must hold, at the catalog's versions."""

    release: Release
    variant: Variant
    requested: tuple[str, ...]  # compute capabilities ("local" requests none to compare)
    toggles: Mapping[str, bool]
    extension: bool = True
    coverage: bool = True
    base_image: str | None = None  # named by digest in the labels (the provenance's base)
    runtime: bool = False
    devel_image: str | None = None
    conformance: bool = False  # a derived image: the derived-image suite passes before any tag moves
    components: tuple[str, ...] = ()  # builder/components/ the image must hold, as the catalog pins them


@dataclass(frozen=True)
class ImageJob:
    """One image to build, check, label and tag (image.produce). BUILDARGS are the build's
    arguments but BUILD_SETTINGS, which the settings' delivery decides when it builds."""

    label: str  # the progress lines' name: "21.08/tf2-py3", "base", "derive"
    context: Context
    log_name: str  # its build log, in the logs directory (paths.logs_dir)
    buildargs: Mapping[str, str] = field(default_factory=dict)
    compile_cache: str | None = None  # a build on loopback needs the host network to reach it
    cache_key: str | None = None  # --layer-cache: this image's cache tag
    target: str | None = None  # the Dockerfile stage
    devel_image: str | None = None  # the `devel` stage taken from this image where BuildKit can
    nocache: bool = False
    expect: Expectation | None = None  # None: nothing to read back (the offline base)
    refs: tuple[str, ...] = ()  # tagged once every check passed
    dated: bool = False  # BUILD_DATE, the time the build starts, is a build argument


def requested_of(meta_capabilities: list[str] | str) -> tuple[str, ...]:
    """A render's capabilities as an expectation holds them ("local" requests none)."""
    return () if isinstance(meta_capabilities, str) else tuple(meta_capabilities)
