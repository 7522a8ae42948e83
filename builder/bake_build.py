"""`builder build --all` on the BuildKit backend: a release's variants, and the offline
base when it has to be built, as one `docker buildx bake` (builder/bake.py's definition
with the run's secrets, layer caches and provenance arguments), so that independent
variants build in parallel and the base once. Each variant image then goes through the
same read-back, labels and tags as a single build (build.finish_variant); the base gets
its recipe tag. With --builders the variants are spread over several builders, one bake
on each, all at once (builder/builders.py); a failed bake fails its own variants only.

The variants are built one by one instead (and the caller says why) where a bake cannot
do what the build asks: the legacy builder has no bake, buildx 0.13's bake has no
`network` option (so no compile cache or settings server on loopback), and BuildKit cannot
resolve a base given as an image id."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from builder import bake, buildcontext, builders, buildsettings, paths, urls
from builder.base import log, make_rootfs, write_context
from builder.base_recipe import BaseRecipe
from builder.build import BaseChoice, options_for, provenance_args
from builder.buildkit_engine import IMAGE_ID
from builder.engine import BakeJob, Engine, Progress
from builder.errors import BuildError
from builder.plan import BuildPlan
from builder.render import render


@dataclass(frozen=True)
class Baked:
    image_id: str  # untagged, not yet read back ("" when its bake failed)
    meta: dict     # the rendered variant's metadata (what the read-back checks)
    log_path: Path
    error: BuildError | None = None  # its bake's failure (the other builders' variants go on)


def why_not(plan: BuildPlan, engine: Engine, base: BaseChoice) -> str | None:
    """Why this --all build cannot be one bake, or None when it can."""
    if engine.backend != "buildkit":
        return "the legacy builder has no bake"
    if urls.on_loopback(plan.compile_cache):
        return "--compile-cache: a bake cannot reach a compile cache on loopback (buildx 0.13's bake has no network option)"
    if IMAGE_ID.match(base.image):
        return "a base given as an image id cannot be resolved by a bake"
    return None


def bake_all(engine, plan: BuildPlan, base: BaseChoice, settings: buildsettings.BuildSettings,
             quiet: bool) -> dict[str, Baked]:
    """Bake every variant of PLAN (and its base, when it must be built); variant -> image."""
    release = plan.release
    recipe = BaseRecipe.for_release(release)
    rendered_all = [render(release, vp.variant, options_for(plan.options, release, base)) for vp in plan.variants]
    with tempfile.TemporaryDirectory(prefix=f"builder-bake-{release.name}-") as tmp:
        layout = bake.Layout(Path(tmp) / "contexts")
        for rendered in rendered_all:
            buildcontext.write(rendered, layout.variant(rendered), plan.framework_src)
        if base.needs_build:
            if not engine.image_id(recipe.rootfs_image):
                make_rootfs(engine, recipe, settings.apt_mirror, Path(tmp))
            write_context(recipe, layout.base(release))
        with buildsettings.deliver(settings, engine.backend) as delivery:
            # a compile cache off loopback is reached over the default network, as a single build reaches it
            args = {**provenance_args(), **({"COMPILE_CACHE": plan.compile_cache} if plan.compile_cache else {})}
            run = bake.RunInputs(delivery.secrets, settings.layer_cache, args, plan.no_cache, settings.compression)
            definition = bake.definition(release, rendered_all, layout, plan.build_id, run,
                                         with_base=base.needs_build)
            variants = definition["group"]["default"]["targets"]
            spread = builders.assign(variants, plan.builders or (settings.builder or builders.HERE,))
            jobs = [BakeJob(definition, targets + ([bake.base_target(release)] if base.needs_build else []),
                            log_name(release.name, plan.build_id, b if len(spread) > 1 else None),
                            None if b == builders.HERE else b)
                    for b, targets in spread.items()]
            outcomes = engine.bake(jobs, Progress(f"{release.name}/all", quiet=quiet))
    if base.needs_build and not isinstance(outcomes[0], BuildError):
        engine.tag(outcomes[0][bake.base_target(release)], recipe.tag)
        log(f"base: tagged {recipe.tag}")
    baked = {}
    for job, outcome in zip(jobs, outcomes):
        for r in rendered_all:
            name = bake.target_name(release.name, r.variant)
            if name in job.targets:
                baked[r.variant] = (Baked("", r.meta, job.log_path, outcome) if isinstance(outcome, BuildError)
                                    else Baked(outcome[name], r.meta, job.log_path))
    return baked


def log_name(release: str, build_id: str, builder: str | None) -> Path:
    """The bake's log: RELEASE-all-BUILDID.log, or one per builder (-on-BUILDER) when spread."""
    return paths.logs_dir() / f"{release}-all-{build_id}{f'-on-{builder}' if builder else ''}.log"
