"""`builder build --all` on the BuildKit backend: a release's variants, and the offline
base when it has to be built, as one `docker buildx bake` (builder/bake.py's definition
with the run's secrets, layer caches and provenance arguments), so that independent
variants build in parallel and the base once. Each variant image then goes through the
same read-back, labels and tags as a single build (build.finish_variant); the base gets
its recipe tag.

The variants are built one by one instead (and the caller says why) where a bake cannot
do what the build asks: the legacy builder has no bake, buildx 0.13's bake has no
`network` option (so no compile cache or settings server on loopback), and BuildKit cannot
resolve a base given as an image id."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from builder import bake, buildcontext, buildsettings, paths
from builder.base import log, make_rootfs, write_context
from builder.base_recipe import BaseRecipe
from builder.build import BaseChoice, options_for, provenance_args
from builder.buildkit_engine import IMAGE_ID
from builder.engine import Engine, Progress
from builder.plan import BuildPlan
from builder.render import render


@dataclass(frozen=True)
class Baked:
    image_id: str  # untagged, not yet read back
    meta: dict     # the rendered variant's metadata (what the read-back checks)
    log_path: Path


def why_not(plan: BuildPlan, engine: Engine, base: BaseChoice) -> str | None:
    """Why this --all build cannot be one bake, or None when it can."""
    if engine.backend != "buildkit":
        return "the legacy builder has no bake"
    if plan.compile_cache:
        return "--compile-cache: a bake cannot reach a compile cache on loopback (buildx 0.13's bake has no network option)"
    if IMAGE_ID.match(base.image):
        return "a base given as an image id cannot be resolved by a bake"
    return None


def bake_all(engine, plan: BuildPlan, base: BaseChoice, settings: buildsettings.BuildSettings,
             quiet: bool) -> dict[str, Baked]:
    """Bake every variant of PLAN (and its base, when it must be built); variant -> image."""
    release = plan.release
    recipe = BaseRecipe(release.offline)
    rendered_all = [render(release, vp.variant, options_for(plan.options, release, base)) for vp in plan.variants]
    log_path = paths.logs_dir() / f"{release.name}-all-{plan.build_id}.log"
    with tempfile.TemporaryDirectory(prefix=f"builder-bake-{release.name}-") as tmp:
        layout = bake.Layout(Path(tmp) / "contexts")
        for rendered in rendered_all:
            buildcontext.write(rendered, layout.variant(rendered), plan.framework_src)
        if base.needs_build:
            if not engine.image_id(recipe.rootfs_image):
                make_rootfs(engine, recipe, settings.apt_mirror, Path(tmp))
            write_context(recipe, layout.base(release))
        with buildsettings.deliver(settings, engine.backend) as delivery:
            run = bake.RunInputs(delivery.secrets, settings.layer_cache, provenance_args(), plan.no_cache)
            definition = bake.definition(release, rendered_all, layout, plan.build_id, run,
                                         with_base=base.needs_build)
            images = engine.bake(definition, sorted(definition["target"]),
                                 Progress(f"{release.name}/all", quiet=quiet), log_path, settings.builder)
    if base.needs_build:
        engine.tag(images[bake.base_target(release)], recipe.tag)
        log(f"base: tagged {recipe.tag}")
    return {r.variant: Baked(images[bake.target_name(release.name, r.variant)], r.meta, log_path)
            for r in rendered_all}
