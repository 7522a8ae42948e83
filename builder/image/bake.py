"""A release's variants as one `docker buildx bake` definition (JSON), so that BuildKit
builds independent images in parallel and a shared stage once.

`definition()` is a pure function of rendered variants and their context directories:
a `base-<release>` target for the offline base (its recipe, FROM the imported Debian
root file system) and one target per variant whose `FROM ${BASE_IMAGE}` is bound to that
base target through a bake target context, so the base is built in the same run, once,
before the variants that need it. No target has tags: the builder tags an image only
after it has been checked. `builder bake -o DIR` writes the contexts and
DIR/docker-bake.json; `--print` prints the definition.

`builder build --all` runs the same definition with the run's own inputs (`RunInputs`):
the build settings as secret files on every target, a registry layer cache per target,
attestations off, and the build's provenance arguments. Those are added only to the
copy the run hands to buildx, never to a file `builder bake` writes."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from builder.catalog import Release
from builder.core import layer_cache
from builder.engine import buildx
from builder.render.base_recipe import BaseRecipe

if TYPE_CHECKING:
    from builder.render import Rendered

BAKE_FILE = "docker-bake.json"


def target_name(*parts: str) -> str:
    """Bake target names allow letters, digits, '-' and '_' only: 21.08 -> 21-08."""
    return "-".join(re.sub(r"[^A-Za-z0-9_-]", "-", p) for p in parts)


@dataclass(frozen=True)
class Layout:
    """Where each context lives under the output directory. The file holds absolute paths:
    buildx resolves relative ones against its working directory, not the file's."""

    root: Path

    def variant(self, rendered: Rendered) -> Path:
        return self.root / rendered.release / rendered.variant

    def base(self, release: Release) -> Path:
        return self.root / f"base-{release.name}"


def base_target(release: Release) -> str:
    return target_name("base", release.name)


@dataclass(frozen=True)
class RunInputs:
    """What one `builder build --all` adds to every target."""

    secrets: dict[str, Path] = field(default_factory=dict)  # BuildKit secret id -> file
    cache_repo: str | None = None  # --layer-cache
    args: dict[str, str] = field(default_factory=dict)  # BUILD_REF, BUILD_DATE, ...
    no_cache: bool = False
    compression: str = "gzip"  # --compression


def _with_run(target: dict, run: RunInputs, cache_name: str) -> dict:
    target = {**target, "args": {**target["args"], **run.args}}
    # no provenance or SBOM: one plain image per target, as `builder build` makes
    target["attest"] = ["type=provenance,disabled=true", "type=sbom,disabled=true"]
    if run.no_cache:
        target["no-cache"] = True
    target["output"] = [buildx.output(compression=run.compression)]
    if run.secrets:
        target["secret"] = [f"id={sid},src={path}" for sid, path in sorted(run.secrets.items())]
    if run.cache_repo:
        ref = layer_cache.ref_for(run.cache_repo, cache_name)
        target["cache-from"] = [f"type=registry,ref={ref}"]
        target["cache-to"] = [f"type=registry,ref={ref},mode=max"]
    return target


def definition(
    release: Release,
    rendered_all: list[Rendered],
    layout: Layout,
    build_id: str,
    run: RunInputs | None = None,
    with_base: bool = True,
) -> dict:
    """The bake definition of RELEASE's RENDERED variants (contexts as LAYOUT places them);
    with RUN, the copy one build runs (secrets, caches, provenance arguments). Without
    WITH_BASE the variants take the offline base from the image store (it exists)."""
    recipe = BaseRecipe.for_release(release)
    base = base_target(release)
    offline_tag = recipe.tag
    targets: dict[str, dict] = {}
    uses_offline_base = False
    for rendered in rendered_all:
        name = target_name(release.name, rendered.variant)
        target = {
            "context": str(layout.variant(rendered)),
            "dockerfile": "Dockerfile",
            "args": {"BASE_IMAGE": rendered.meta["base_image"], "BUILD_ID": build_id},
            "output": [buildx.output()],
        }
        if rendered.meta.get("target"):  # a layered Dockerfile: its devel stage
            target["target"] = rendered.meta["target"]
        if rendered.meta["base_image"] == offline_tag and with_base:
            # FROM ${BASE_IMAGE} is resolved through the base target, not the image store.
            target["contexts"] = {offline_tag: f"target:{base}"}
            uses_offline_base = True
        targets[name] = _with_run(target, run, f"{release.name}-{rendered.variant}") if run else target
    if uses_offline_base:
        targets[base] = {
            "context": str(layout.base(release)),
            "dockerfile": "Dockerfile",
            "args": {"ROOTFS_IMAGE": recipe.rootfs_image},
            "output": [buildx.output()],
        }
        if run:
            # the base takes no provenance arguments: `builder base` gives it none
            targets[base] = _with_run(
                targets[base], dataclasses.replace(run, args={}), layer_cache.base_name(offline_tag)
            )
    variants = [target_name(release.name, r.variant) for r in rendered_all]
    return {"group": {"default": {"targets": variants}}, "target": dict(sorted(targets.items()))}
