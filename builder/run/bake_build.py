"""`builder build --all` on the BuildKit backend: a release's variants, and the offline
base when it has to be built, as one `docker buildx bake` (builder/image/bake.py's definition
with the run's secrets, layer caches and provenance arguments), so that independent
variants build in parallel and the base once. Each variant image then goes through the
same read-back, labels and tags as a single build (image.finish, with the plan's own
job); the base gets its recipe tag. With --builders the variants are spread over several builders, one bake
on each, all at once (builder/engine/builders.py); a failed bake fails its own variants only.

The variants are built one by one instead (and the caller says why) where a bake cannot
do what the build asks: the legacy builder has no bake, buildx 0.13's bake has no
`network` option (so no compile cache or settings server on loopback), and BuildKit cannot
resolve a base given as an image id."""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from builder import image
from builder.core import paths, provenance, urls
from builder.core.errors import BuildError, UserError
from builder.engine import BakeJob, Engine, Progress, ProgressMode, builders, buildsettings
from builder.engine.buildkit_engine import IMAGE_ID
from builder.image import bake, buildcontext
from builder.render.job import ImageJob
from builder.run import base
from builder.run.base import BaseChoice, log, make_rootfs

if TYPE_CHECKING:
    from builder.plan import BuildPlan


@dataclass(frozen=True)
class Baked:
    image_id: str  # untagged, not yet read back ("" when its bake failed)
    job: ImageJob  # the plan's job of the variant's image, logging where its bake logged
    error: BuildError | None = None  # its bake's failure (the other builders' variants go on)


def bake_variants(
    plan: BuildPlan,
    engine: Engine,
    choice: BaseChoice,
    settings: buildsettings.BuildSettings,
    progress: ProgressMode,
    say: Callable[[str], None],
) -> dict[str, Baked] | None:
    """--all: every variant (and the base, when it must be built) in one bake, or None
    (said why) where the variants must be built one by one."""
    why = why_not(plan, engine, choice)
    if why and plan.builders:
        raise UserError(f"--builders: {why}")
    if why:
        say(f"--all: building the variants one by one: {why}")
        return None
    if len(plan.builders) > 1:
        base.prepare(
            engine, choice, plan.recipe, plan.base_job, settings, progress
        )  # once, here: every builder starts FROM it
        choice = dataclasses.replace(choice, needs_build=False)
        say(f"--all: {len(plan.variants)} variant(s) spread over {len(plan.builders)} builders, one bake each")
    else:
        say(f"--all: one bake of {len(plan.variants)} variant(s)" + (" and the base" if choice.needs_build else ""))
    return bake_all(engine, plan, choice, settings, progress)


def why_not(plan: BuildPlan, engine: Engine, choice: BaseChoice) -> str | None:
    """Why this --all build cannot be one bake, or None when it can."""
    if engine.backend != "buildkit":
        return "the legacy builder has no bake"
    if urls.on_loopback(plan.compile_cache):
        return "--compile-cache: a bake cannot reach a compile cache on loopback (buildx 0.13's bake has no network option)"
    if IMAGE_ID.match(choice.image):
        return "a base given as an image id cannot be resolved by a bake"
    return None


def bake_all(
    engine, plan: BuildPlan, choice: BaseChoice, settings: buildsettings.BuildSettings, progress: ProgressMode
) -> dict[str, Baked]:
    """Bake every variant of PLAN (and its base, when it must be built); variant -> image."""
    release, recipe = plan.release, plan.recipe
    rendered_all = [vp.renders[choice.kind] for vp in plan.variants]  # rendered by the plan for this base
    with tempfile.TemporaryDirectory(prefix=f"builder-bake-{release.name}-") as tmp:
        layout = bake.Layout(Path(tmp) / "contexts")
        for rendered in rendered_all:
            buildcontext.write(rendered, layout.variant(rendered), plan.framework_src)
        base_job = plan.base_job if choice.needs_build else None
        if base_job is not None:  # the plan makes the base's job wherever it may be built
            if not engine.image_id(recipe.rootfs_image):
                make_rootfs(engine, recipe, settings.apt_mirror, Path(tmp))
            image.write_files(recipe.files_context(), layout.base(release))
        with buildsettings.deliver(settings, engine.backend) as delivery:
            # a compile cache off loopback is reached over the default network, as a single build reaches it
            args = {
                "BUILD_REF": plan.builder_args["BUILD_REF"],
                "BUILD_DATE": provenance.build_date(),
            }  # BUILD_ID: the definition's
            args.update({"COMPILE_CACHE": plan.compile_cache} if plan.compile_cache else {})
            run = bake.RunInputs(
                delivery.secrets,
                settings.layer_cache,
                {**plan.user_build_args, **args},
                plan.no_cache,
                settings.compression,
            )
            definition = with_base_args(
                bake.definition(release, rendered_all, layout, plan.build_id, run, with_base=choice.needs_build),
                release,
                dict(plan.base_job.buildargs) if plan.base_job else {},
            )
            variants = definition["group"]["default"]["targets"]
            spread = builders.assign(variants, plan.builders or (settings.builder or builders.HERE,))
            jobs = [
                BakeJob(
                    definition,
                    targets + ([bake.base_target(release)] if choice.needs_build else []),
                    log_name(release.name, plan.build_id, b if len(spread) > 1 else None),
                    None if b == builders.HERE else b,
                )
                for b, targets in spread.items()
            ]
            outcomes = engine.bake(jobs, Progress(f"{release.name}/all", mode=progress))
    if base_job is not None and not isinstance(outcomes[0], BuildError):
        image.finish(engine, base_job, outcomes[0][bake.base_target(release)])
        log(f"base: tagged {recipe.tag}")
    baked = {}
    for bake_job, outcome in zip(jobs, outcomes):
        for vp in plan.variants:
            name = bake.target_name(release.name, vp.variant.name)
            if name in bake_job.targets:
                job = vp.images[choice.kind][0]
                if bake_job.log_path is not None:  # the bake's log is the variant's
                    job = dataclasses.replace(job, log_name=bake_job.log_path.name)
                baked[vp.variant.name] = (
                    Baked("", job, outcome) if isinstance(outcome, BuildError) else Baked(outcome[name], job)
                )
    return baked


def with_base_args(definition: dict, release, base_args: dict[str, str]) -> dict:
    """DEFINITION with the base target given the plan's base job's arguments too (the
    --build-arg proxies), as a single build of the base gets them."""
    base_target = definition["target"].get(bake.base_target(release))
    if base_target is not None and base_args:
        base_target["args"] = {**base_args, **base_target["args"]}
    return definition


def log_name(release: str, build_id: str, builder: str | None) -> Path:
    """The bake's log: RELEASE-all-BUILDID.log, or one per builder (-on-BUILDER) when spread."""
    return paths.logs_dir() / f"{release}-all-{build_id}{f'-on-{builder}' if builder else ''}.log"
