"""Carrying plans out: `run_*(plan, connect, ...)` does the I/O a plan describes, on any
engine that implements `builder.engine.Engine` (the Docker engine, or the fake one the
unit tests use). The engine comes as CONNECT, a factory called only once everything that
can be checked without it has been (the settings, the registry, the key): with no engine,
a bad option is still its own one line. The plan holds every render, job and tag; a run
chooses the base and hands each job to image.produce. Results go to `out.result` (stdout), messages to `out.say`
(stderr); failures are BuilderErrors, which the CLI's one handler prints.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable

from builder import image, registry, supply_chain
from builder.core.contract import Label
from builder.core.errors import BuildError, Reported, Unverified, UserError
from builder.core.output import BuildOutcome, Output, summary
from builder.core.redact import redact
from builder.engine import Engine, ProgressMode, Unreachable, buildx
from builder.engine.buildsettings import BuildSettings
from builder.image import describe, runtime_image
from builder.image.conformance import runner
from builder.plan import BasePlan, BuildPlan, DerivePlan, PushPlan, derive
from builder.run import bake_build, base
from builder.supply_chain import signing


def run_build(
    plan: BuildPlan,
    connect: Callable[[], Engine],
    settings: BuildSettings,
    creds=None,
    *,
    dry_run: bool = False,
    progress: ProgressMode = ProgressMode.AUTO,
    as_json: bool = False,
    out: Output | None = None,
) -> list[BuildOutcome]:
    """Check the local inputs and the registry, then connect to the engine: choose (and
    build) the base, produce each variant's images, push them. PROGRESS: what the terminal
    shows. AS_JSON: one JSON document on stdout instead of a line per ref."""
    out = out or Output()
    for name, reason in plan.skipped:
        out.say(f"skipped {name}: {reason}")
    for note in plan.notes:
        out.say(note)
    hosts = sorted({registry.registry_host(p.ref) for p in plan.pushes.values()})
    if creds and len(hosts) > 1:  # one registry's password is never sent to another
        raise UserError(
            f"--push: the tags go to {len(hosts)} registries ({', '.join(hosts)}), but the credentials "
            "given are one registry's: push to one registry per build (or use docker login's)"
        )
    for host in hosts:  # before any build: an untrusted certificate or a bad password fails now
        registry.check_before_build(host, creds, plan.insecure_registry)
    if plan.sign:  # a missing key or a wrong password fails before the build, not after it
        signing.unlock(plan.sign, plan.key_password_env)
    if plan.builders and not dry_run:
        if settings.builder:
            raise UserError("--builder and --builders exclude each other: give the builders with --builders A,B")
        for name in plan.builders:
            buildx.check_builder(name)
    engine = _reached(connect, out) if dry_run else connect()
    choice = base.choose(engine, plan.base_decision, dry_run)
    out.say(f"base: {choice.image} ({choice.reason})")
    if plan.runtime and choice.kind != "offline":  # before anything is built
        raise UserError(
            f"--runtime stands on the offline base's Debian, but the base is {choice.image}: give --base offline"
        )
    if dry_run:
        planned = [dry_run_entry(plan, vp, choice) for vp in plan.variants]
        if as_json:
            out.result(
                json.dumps(
                    {
                        "dry_run": True,
                        "release": plan.release.name,
                        "build_id": plan.build_id,
                        "base": base_entry(choice),
                        "variants": planned,
                        "skipped": [{"variant": n, "why": w} for n, w in plan.skipped],
                    },
                    indent=2,
                )
            )
        else:
            for entry in planned:
                out.result(json.dumps(entry))
        return []
    assert engine is not None  # only a dry run goes on without one
    report = Output(result=lambda line: None, say=out.say) if as_json else out  # JSON: printed once, at the end
    built: list[dict] = []
    try:
        return _build_all(plan, engine, choice, settings, creds, progress, report, built)
    finally:
        if as_json:  # what was built and pushed, even when a variant failed after it
            out.result(
                json.dumps(
                    {
                        "release": plan.release.name,
                        "build_id": plan.build_id,
                        "base": base_entry(choice),
                        "images": built,
                    },
                    indent=2,
                )
            )


def _build_all(
    plan: BuildPlan,
    engine: Engine,
    choice: base.BaseChoice,
    settings: BuildSettings,
    creds,
    progress: ProgressMode,
    out: Output,
    built: list[dict],
) -> list[BuildOutcome]:
    """run_build's builds and pushes; BUILT collects each image as --json reports it."""
    baked = bake_build.bake_variants(plan, engine, choice, settings, progress, out.say) if plan.keep_going else None
    if baked is None:
        base.prepare(engine, choice, plan.recipe, plan.base_job, settings, progress)
    outcomes: list[BuildOutcome] = []
    unverified: list[Unverified] = []  # published, not read back: the others are still pushed
    for vp in plan.variants:
        jobs = vp.images[choice.kind]
        try:
            produced: list[image.Produced] = []
            if baked is not None:  # --all: the bake built the devel image; read back, labelled, tagged here
                done = baked[vp.variant.name]
                if done.error:
                    raise done.error
                produced = [image.Produced(image.finish(engine, done.job, done.image_id, settings.compression))]
            produced += [image.produce(engine, job, settings, progress) for job in jobs[len(produced) :]]
            for job, made in zip(jobs, produced):
                entry: dict[str, Any] = {
                    "variant": vp.variant.name,
                    "image": "runtime" if job.target == runtime_image.STAGE else "devel",
                    "refs": list(job.refs),
                    "image_id": made.image_id,
                    "pushed": [],
                }
                built.append(entry)
                for ref in job.refs:
                    out.result(ref)
                if plan.sbom:
                    make_sbom(engine, job.refs[0], out)
                for ref in job.refs if plan.pushes else ():
                    try:
                        result = push_image(plan.pushes[ref], engine, creds, progress=progress, out=out)
                        entry["pushed"].append({"ref": result.ref, "digest": result.digest})
                    except Unverified as exc:
                        out.say(exc.report())
                        unverified.append(exc)
                        entry["pushed"].append({"ref": plan.pushes[ref].ref, "digest": None, "verified": False})
            outcome = BuildOutcome(
                plan.release.name, vp.variant.name, produced[0].image_id, list(jobs[0].refs), produced[0].seconds
            )
        except BuildError as exc:
            if not plan.keep_going:
                raise
            out.say(exc.report())
            built.append({"variant": vp.variant.name, "error": exc.message})
            outcome = BuildOutcome(plan.release.name, vp.variant.name, error=exc.message)
        outcomes.append(outcome)
    if plan.keep_going:
        summary(outcomes, len(plan.skipped), out.say)
    if unverified:
        raise Reported(f"{len(unverified)} pushed image(s) published but not verified (above)", exit_code=3)
    return outcomes


def base_entry(choice: base.BaseChoice) -> dict:
    return {"kind": choice.kind, "image": choice.image, "reason": choice.reason, "build": choice.needs_build}


def _reached(connect: Callable[[], Engine], out: Output) -> Engine | None:
    """--dry-run's engine: a plan is still printed without one, saying what it could not check."""
    try:
        return connect()
    except Unreachable as exc:
        out.say(f"note: {exc}: whether the base is here is not checked")
        return None


def dry_run_entry(plan: BuildPlan, vp, choice: base.BaseChoice) -> dict:
    """One variant's complete plan, as --dry-run prints it: its base, every image it builds
    (devel and/or runtime) with its tags, the capabilities compiled, the pushes."""
    jobs = vp.images[choice.kind]
    rendered = vp.renders[choice.kind]
    return {
        "release": plan.release.name,
        "variant": vp.variant.name,
        "base": choice.image,
        "base_kind": choice.kind,
        "build_base": choice.needs_build,
        "tags": [ref for job in jobs for ref in job.refs],
        "build_id": plan.build_id,
        "images": [
            {
                "image": "runtime" if job.target == runtime_image.STAGE else "devel",
                "refs": list(job.refs),
                "target": job.target,
            }
            for job in jobs
        ],
        "runtime": plan.runtime,
        "runtime_only": plan.runtime_only,
        "cuda_compute_capabilities": rendered.meta["cuda_compute_capabilities"],
        "toggles": rendered.meta["toggles"],
        "build_args": {k: redact(v) for k, v in plan.user_build_args.items()},
        "pushes": [{"ref": ref, "to": plan.pushes[ref].ref} for job in jobs for ref in job.refs if ref in plan.pushes],
        "sign": bool(plan.sign),
    }


def make_sbom(engine: Engine, ref: str, out: Output) -> None:
    """The image's SBOM, kept per image id (`builder sbom` and `push --sign` use it). The
    image is built and tagged already: a scan that fails is a warning, not a failed build."""
    try:
        supply_chain.sbom_of(engine, ref)
        out.say(f"sbom: {supply_chain.kept_path(engine.image_id(ref) or ref)}")
    except UserError as exc:
        out.say(f"warning: no SBOM for {ref}: {exc}")


def run_push(
    plan: PushPlan,
    connect: Callable[[], Engine],
    creds=None,
    *,
    progress: ProgressMode = ProgressMode.AUTO,
    as_json: bool = False,
    out: Output | None = None,
):
    """`builder push`: the key unlocked, then the engine connected and what --sign attaches
    made (before anything is pushed), then push_image."""
    password = signing.unlock(plan.sign, plan.key_password_env) if plan.sign else None
    engine = supply_chain.ready_to_sign(connect(), plan)
    return push_image(plan, engine, creds, progress=progress, as_json=as_json, out=out, password=password)


def push_image(
    plan: PushPlan,
    engine: Engine,
    creds=None,
    *,
    progress: ProgressMode = ProgressMode.AUTO,
    as_json: bool = False,
    out: Output | None = None,
    password: str | None = None,
):
    """Push, verify the digest through the registry API, print REF@DIGEST (or the report).
    PASSWORD: the --sign key's, when the caller unlocked it already."""
    out = out or Output()
    if plan.sign and password is None:  # before anything is pushed: a missing key or password wastes no upload
        password = signing.unlock(plan.sign, plan.key_password_env)
    key = (plan.sign, password) if plan.sign and password is not None else None
    try:
        # the registry's Pusher still spells the mode `quiet`
        result = registry.Pusher(engine, tries=plan.tries, progress=progress).push(
            plan.image, plan.ref, creds, plan.insecure
        )
    except Unverified as exc:
        if not plan.sign:
            raise
        raise Unverified(f"{exc}; not signed (the signature names a verified digest)") from None
    if key:
        transport = registry.probe(registry.registry_host(plan.ref), plan.insecure)
        creds = registry.allowed_credentials(transport, creds)
        access = signing.Access.to(transport, creds)
        out.say(f"signing {result.pinned} and attaching its SBOM and provenance")
        supply_chain.sign_pushed(engine, plan.image, result.pinned, *key, access)
    out.result(registry.write_report(result) if as_json else result.pinned)
    return result


def run_derive(
    plan: DerivePlan,
    connect: Callable[[], Engine],
    settings: BuildSettings,
    catalog,
    *,
    progress: ProgressMode = ProgressMode.AUTO,
    as_json: bool = False,
    creds=None,
    out: Output | None = None,
) -> str:
    """Check the registry, connect, check the parent and the patches, build untagged, read
    back, test, then tag (and push, with --push)."""
    out = out or Output()
    if plan.push:  # before the build: an untrusted certificate or a bad password fails now
        registry.check_before_build(registry.registry_host(plan.push.ref), creds, plan.push.insecure)
    engine = connect()
    derive.check_parent_is_devel(
        plan.parent, describe.labels_of(engine, plan.parent)
    )  # a devel image, or a clear error
    info = engine.inspect(plan.parent)
    derive.check_capabilities(plan.spec, plan.parent, info)
    derive.check_patches(engine, plan.parent, plan.spec.patches)
    derive.check_component_patches(engine, plan.parent, plan.spec.component_patches)
    labels = dict(info["Config"].get("Labels") or {})
    resolved, constraints = derive.resolve_pip(engine, plan.spec, plan.parent, labels, settings.pip_index)
    job = derive.job(
        plan.spec,
        plan.parent,
        info,
        catalog,
        plan.tag,
        plan.log_name,
        plan.compile_cache,
        plan.no_cache,
        plan.test,
        resolved,
        constraints,
    )
    if plan.user_build_args:  # checked by plan_derive against the derived template's ARGs
        job = dataclasses.replace(job, buildargs={**plan.user_build_args, **job.buildargs})
    image_id = image.produce(engine, job, settings, progress).image_id
    if not as_json:
        out.result(plan.tag)
    if plan.sbom:
        make_sbom(engine, plan.tag, out)
    pushed = None
    try:
        if plan.push:
            pushed = push_image(
                plan.push, engine, creds, progress=progress, out=Output(lambda line: None, out.say) if as_json else out
            )
    finally:  # what was built, even when its push was published but not verified
        if as_json:
            out.result(
                json.dumps(
                    {
                        "image": plan.tag,
                        "image_id": image_id,
                        "parent": plan.parent,
                        "pushed": {"ref": pushed.ref, "digest": pushed.digest} if pushed else None,
                    },
                    indent=2,
                )
            )
    return image_id


def run_base(
    plan: BasePlan,
    connect: Callable[[], Engine],
    settings: BuildSettings,
    *,
    progress: ProgressMode = ProgressMode.AUTO,
    as_json: bool = False,
    out: Output | None = None,
) -> str:
    """`builder base`: SETTINGS checked, then the engine connected and the base built (or found)."""
    out = out or Output()
    settings.validate()
    engine = connect()
    tag, built = base.ensure_base(engine, plan.recipe, settings, rebuild=plan.rebuild, progress=progress, job=plan.job)
    if not built:
        out.say(f"base: {tag} exists (recipe unchanged); nothing to do")
    out.result(json.dumps({"tag": tag, "image_id": engine.image_id(tag), "built": built}, indent=2) if as_json else tag)
    return tag


def print_base_recipe(
    plan: BasePlan, as_json: bool, settings: Callable[[], BuildSettings], out: Output | None = None
) -> None:
    """`builder base --print`: the recipe's Dockerfile (stdout) and its tag (stderr), or both as JSON.
    SETTINGS (the options' reader) is read first: the build options a build would refuse (a
    fifo as --ca-bundle, a missing credentials file) are refused here too, as --dry-run does."""
    out = out or Output()
    settings()
    if as_json:
        out.result(json.dumps({"tag": plan.tag, "dockerfile": plan.recipe.dockerfile()}, indent=2))
        return
    out.result(plan.recipe.dockerfile().rstrip("\n"))
    out.say(f"tag: {plan.tag}")


def run_tests(
    image_ref: str, tests: list[Path], select: str | None, connect: Callable[[], Engine], *, out: Output | None = None
) -> int:
    """The conformance suite (plus TESTS) against a container of IMAGE_REF; pytest's exit
    code. A derived image re-runs its parent's suite (the same one) plus its own checks."""
    out = out or Output()
    if select is not None:
        runner.check_select(select)
    for t in tests:
        if not t.exists():
            raise UserError(f"--tests {t}: no such file or directory")
    labels = describe.labels_of(connect(), image_ref)
    extra = [str(t) for t in tests]
    if labels.get(Label.PARENT) and runner.DERIVED_SUITE.is_dir():
        extra.append(str(runner.DERIVED_SUITE))
    out.say(f"test: {image_ref}: {' '.join([str(runner.SUITE), *extra])}")
    return runner.run(image_ref, extra, select)
