"""A release's variants as one `docker buildx bake` definition (JSON), so that BuildKit
builds independent images in parallel and a shared stage once.

`definition()` is a pure function of rendered variants and their context directories:
a `base-<release>` target for the offline base (its recipe, FROM the imported Debian
root file system) and one target per variant whose `FROM ${BASE_IMAGE}` is bound to that
base target through a bake target context, so the base is built in the same run, once,
before the variants that need it. No target has tags: the builder tags an image only
after it has been checked. `builder bake -o DIR` writes the contexts and
DIR/docker-bake.json; `--print` prints the definition.

Not here yet: the build settings (apt mirror, pip index, CA) and the compile cache are
per-run values the builder adds when it runs the bake (`--set '*.args...'`), never
written into the file."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from builder.base_recipe import BaseRecipe
from builder.catalog import Release
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


def definition(release: Release, rendered_all: list[Rendered], layout: Layout, build_id: str) -> dict:
    """The bake definition of RELEASE's RENDERED variants (contexts as LAYOUT places them)."""
    recipe = BaseRecipe(release.offline)
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
            "output": ["type=docker"],
        }
        if rendered.meta["base_image"] == offline_tag:
            # FROM ${BASE_IMAGE} is resolved through the base target, not the image store.
            target["contexts"] = {offline_tag: f"target:{base}"}
            uses_offline_base = True
        targets[name] = target
    if uses_offline_base:
        targets[base] = {
            "context": str(layout.base(release)),
            "dockerfile": "Dockerfile",
            "args": {"ROOTFS_IMAGE": recipe.rootfs_image},
            "output": ["type=docker"],
        }
    variants = [target_name(release.name, r.variant) for r in rendered_all]
    return {"group": {"default": {"targets": variants}}, "target": dict(sorted(targets.items()))}
