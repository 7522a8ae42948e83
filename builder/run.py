"""Carrying plans out: `run_*(plan, engine, ...)` does the I/O a plan describes, on any
engine that implements `builder.engine.Engine` (the Docker engine, or the fake one the
unit tests use). Results go to `out.result` (stdout), messages to `out.say` (stderr);
failures are BuilderErrors, which the CLI's one handler prints.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from builder import buildcontext, paths
from builder.build import BuildOutcome
from builder.buildsettings import BuildSettings
from builder.engine import Engine
from builder.catalog import Release
from builder.errors import BuildError, BuildFailure, Reported, Unverified, UserError, say
from builder.plan import BasePlan, BuildPlan, DerivePlan, PushPlan, plan_push, render_options


@dataclass
class Output:
    """Where a run reports: results (stdout) and messages (stderr, credentials redacted)."""

    result: Callable[[str], None] = print
    say: Callable[[str], None] = say


def run_build(plan: BuildPlan, connect: Callable[[], Engine], settings: BuildSettings, creds=None, *,
              dry_run: bool = False, quiet: bool = False, out: Output | None = None) -> list[BuildOutcome]:
    """Check the local inputs and the registry, then connect to the engine: choose (and
    build) the base, build each variant, tag it only on success, push it."""
    from builder import build as b

    out = out or Output()
    for name, reason in plan.skipped:
        out.say(f"skipped {name}: {reason}")
    for vp in plan.variants:
        jit, built = vp.rendered.meta.get("ptx_jit"), vp.rendered.meta["cuda_compute_capabilities"]
        if jit:
            out.say(f"note: {vp.variant.name}: {', '.join(jit)} will run by PTX JIT of compute_"
                    f"{built[-1].replace('.', '')} (--allow-ptx-jit); SASS for {', '.join(built)}")
    buildcontext.check_tree(plan.framework_src or paths.framework_src_dir())  # no host files in the image
    if plan.push_to:  # before any build: an untrusted certificate or a bad password fails now
        from builder import registry as reg

        reg.check_before_build(reg.registry_host(plan.push_to), creds, plan.insecure_registry)
    if plan.sign:  # a missing key or a wrong password fails before the build, not after it
        from builder import signing

        signing.unlock(plan.sign, plan.key_password_env)
    if plan.builders and not dry_run:
        if settings.builder:
            raise UserError("--builder and --builders exclude each other: give the builders with --builders A,B")
        from builder import buildx

        for name in plan.builders:
            buildx.check_builder(name)
    engine = connect()
    choice = b.choose_base(engine, plan.release, plan.base, dry_run)
    out.say(f"base: {choice.image} ({choice.reason})")
    if plan.runtime and choice.kind != "offline":  # before anything is built
        raise UserError(f"--runtime stands on the offline base's Debian, but the base is {choice.image}: "
                        "give --base offline")
    if dry_run:
        for line in plan.dry_run(choice.image, choice.kind, choice.needs_build):
            out.result(json.dumps(line))
        return []
    baked = bake_variants(plan, engine, choice, settings, quiet, out) if plan.keep_going else None  # --all
    if baked is None:
        b.prepare_base(engine, plan.release, choice, settings, quiet)
    outcomes = []
    unverified: list[Unverified] = []  # published, not read back: the others are still pushed
    for vp in plan.variants:
        try:
            if plan.runtime_only:  # one image: the runtime stage, its devel stage never exported
                from builder import runtime

                refs = runtime.make(engine, plan.release, vp.variant, plan.options, list(vp.refs), choice,
                                    plan.build_id, plan.framework_src, settings, quiet, plan.compile_cache,
                                    devel_exported=False, nocache=plan.no_cache)
                outcome = BuildOutcome(plan.release.name, vp.variant.name, engine.image_id(refs[0]) or "", refs)
            elif baked is not None:
                done = baked[vp.variant.name]
                if done.error:
                    raise done.error
                outcome = b.finish_variant(engine, plan.release, vp.variant, done.meta, done.image_id, list(vp.refs),
                                           done.log_path, plan.framework_src, compression=settings.compression)
            else:
                outcome = b.build_variant(engine, plan.release, vp.variant, plan.options, base=choice,
                                          settings=settings, build_id=plan.build_id, refs=list(vp.refs),
                                          nocache=plan.no_cache, framework_src=plan.framework_src, quiet=quiet,
                                          compile_cache=plan.compile_cache)
            images = [list(outcome.refs)]
            if plan.runtime and not plan.runtime_only:
                from builder import runtime

                images.append(runtime.make(engine, plan.release, vp.variant, plan.options, list(outcome.refs), choice,
                                           plan.build_id, plan.framework_src, settings, quiet, plan.compile_cache))
            for refs in images:
                for ref in refs:
                    out.result(ref)
                if plan.sbom:
                    make_sbom(engine, refs[0], out)
                if plan.push_to:
                    for ref in refs:
                        try:
                            run_push(plan_push_of(ref, plan), engine, creds, quiet=quiet, out=out)
                        except Unverified as exc:
                            out.say(exc.report())
                            unverified.append(exc)
        except BuildError as exc:
            if not plan.keep_going:
                raise
            out.say(exc.report())
            outcome = BuildOutcome(plan.release.name, vp.variant.name, error=exc.message)
        outcomes.append(outcome)
    if plan.keep_going:
        failed = [o for o in outcomes if o.error]
        out.say(f"summary: {len(outcomes) - len(failed)} built, {len(failed)} failed, {len(plan.skipped)} skipped")
        for o in outcomes:
            out.say(f"  {o.release}/{o.variant}: " + (f"FAILED ({o.error})" if o.error else
                                                    f"built in {o.seconds:.0f}s -> {', '.join(o.refs)}"))
        if failed:
            raise Reported(f"{len(failed)} of {len(outcomes)} variants failed")
    if unverified:
        raise Reported(f"{len(unverified)} pushed image(s) published but not verified (above)", exit_code=3)
    return outcomes


def make_sbom(engine: Engine, ref: str, out: Output) -> None:
    """The image's SBOM, kept per image id (`builder sbom` and `push --sign` use it). The
    image is built and tagged already: a scan that fails is a warning, not a failed build."""
    from builder import supply_chain

    try:
        supply_chain.sbom_of(engine, ref)
        out.say(f"sbom: {supply_chain.kept_path(engine.image_id(ref) or ref)}")
    except UserError as exc:
        out.say(f"warning: no SBOM for {ref}: {exc}")


def bake_variants(plan: BuildPlan, engine: Engine, choice, settings: BuildSettings, quiet: bool, out: Output):
    """--all: every variant (and the base, when it must be built) in one bake, or None
    (said why) where the variants must be built one by one."""
    from builder import bake_build

    why = bake_build.why_not(plan, engine, choice)
    if why and plan.builders:
        raise UserError(f"--builders: {why}")
    if why:
        out.say(f"--all: building the variants one by one: {why}")
        return None
    if len(plan.builders) > 1:
        from builder import build as b

        b.prepare_base(engine, plan.release, choice, settings, quiet)  # once, here: every builder starts FROM it
        choice = dataclasses.replace(choice, needs_build=False)
        out.say(f"--all: {len(plan.variants)} variant(s) spread over {len(plan.builders)} builders, one bake each")
    else:
        out.say(f"--all: one bake of {len(plan.variants)} variant(s)" + (" and the base" if choice.needs_build else ""))
    return bake_build.bake_all(engine, plan, choice, settings, quiet)


def plan_push_of(ref: str, plan: BuildPlan) -> PushPlan:
    return plan_push(ref, plan.push_to or "", None, 4, plan.insecure_registry, plan.sign, plan.key_password_env)


def run_push(plan: PushPlan, engine: Engine, creds=None, *, quiet: bool = False, as_json: bool = False,
             out: Output | None = None):
    """Push, verify the digest through the registry API, print REF@DIGEST (or the report)."""
    from builder import registry as reg

    out = out or Output()
    password = None
    if plan.sign:  # before anything is pushed: a missing key or password wastes no upload
        from builder import signing

        password = signing.unlock(plan.sign, plan.key_password_env)
    try:
        result = reg.Pusher(engine, tries=plan.tries, quiet=quiet).push(plan.image, plan.ref, creds, plan.insecure)
    except Unverified as exc:
        if not plan.sign:
            raise
        raise Unverified(f"{exc}; not signed (the signature names a verified digest)") from None
    if plan.sign:
        from builder import signing, supply_chain

        transport = reg.probe(reg.registry_host(plan.ref), plan.insecure)
        creds = reg.allowed_credentials(transport, creds)
        access = signing.Access.to(transport, creds)
        out.say(f"signing {result.pinned} and attaching its SBOM and provenance")
        supply_chain.sign_pushed(engine, plan.image, result.pinned, plan.sign, password, access)
    out.result(reg.write_report(result) if as_json else result.pinned)
    return result


def run_derive(plan: DerivePlan, engine: Engine, settings: BuildSettings, catalog, *, quiet: bool = False,
               out: Output | None = None) -> str:
    """Check the parent and the patches, build untagged, read back, test, then tag."""
    from builder import derive as dv, inspect as insp

    out = out or Output()
    dv.check_parent_is_devel(plan.parent, insp.labels_of(engine, plan.parent))  # a builder devel image, or a clear error
    dv.check_capabilities(plan.spec, plan.parent, engine.inspect(plan.parent))
    dv.check_patches(engine, plan.parent, plan.spec.patches)
    dv.check_horovod_patches(engine, plan.parent, plan.spec.horovod_patches)
    log_path = paths.logs_dir() / plan.log_name
    image_id = dv.build(engine, plan.spec, plan.parent, settings, plan.compile_cache, plan.no_cache, log_path, quiet)
    image_id = dv.verify_and_label(engine, catalog, image_id, log_path, settings.compression)
    if plan.test:
        from builder.conformance import runner

        if runner.run(image_id, [str(runner.DERIVED_SUITE)], stdout=sys.stderr) != 0:
            raise BuildFailure(f"the derived image {image_id[:19]} failed its conformance tests; "
                               f"{plan.tag} was not moved")
    engine.tag(image_id, plan.tag)
    out.result(plan.tag)
    if plan.sbom:
        make_sbom(engine, plan.tag, out)
    return image_id


def run_base(plan: BasePlan, engine: Engine, settings: BuildSettings, *, quiet: bool = False,
             out: Output | None = None) -> str:
    from builder.base import ensure_base

    out = out or Output()
    tag, built = ensure_base(engine, plan.recipe, settings, rebuild=plan.rebuild, quiet=quiet)
    if not built:
        out.say(f"base: {tag} exists (recipe unchanged); nothing to do")
    out.result(tag)
    return tag


def run_tests(image: str, tests: list[Path], select: str | None, connect: Callable[[], Engine], *,
              out: Output | None = None) -> int:
    """The conformance suite (plus TESTS) against a container of IMAGE; pytest's exit code.
    A derived image re-runs its parent's suite (the same one) plus its own checks."""
    from builder import inspect as insp
    from builder.conformance import runner
    from builder.contract import Label

    out = out or Output()
    if select is not None:
        runner.check_select(select)
    for t in tests:
        if not t.exists():
            raise UserError(f"--tests {t}: no such file or directory")
    labels = insp.labels_of(connect(), image)
    extra = [str(t) for t in tests]
    if labels.get(Label.PARENT) and runner.DERIVED_SUITE.is_dir():
        extra.append(str(runner.DERIVED_SUITE))
    out.say(f"test: {image}: {' '.join([str(runner.SUITE), *extra])}")
    return runner.run(image, extra, select)


def run_lock(catalog, release: str | None, variant: str | None, check: bool, upgrade: bool, *,
             out: Output | None = None) -> bool:
    """Write (or, with CHECK, compare) the hash-locked requirements; False when CHECK found
    the committed locks differ from the catalog."""
    from builder import lock as lk

    out = out or Output()
    if check and upgrade:
        raise UserError("--check and --upgrade exclude each other")
    root = lk.locks_dir()
    plan = lk.plan(catalog, release, variant)
    for reason in plan.skipped:
        out.say(f"skipped {reason}")
    where = lk.shown(root)
    if check:
        problems = lk.check(plan, root)
        if problems:
            out.say("\n".join([f"{where} differs from the catalog (run `builder lock`):", *(f"  {p}" for p in problems)]))
            return False
        out.result(f"{where} matches the catalog ({len(plan.targets)} locks, {len(plan.horovod)} Horovod locks)")
        return True
    written, current, removed = lk.write(plan, root, upgrade, out.say)
    for path in written:
        out.result(f"wrote {lk.shown(path)}")
    for path in removed:
        out.result(f"removed {lk.shown(path)} (stray)")
    out.say(f"locks: {len(written)} written, {current} up to date, {len(removed)} removed, "
            f"{len(plan.skipped)} variants skipped")
    return True


def run_render(rel: Release, variant: str | None, render: dict, output: Path | None, *,
               out: Output | None = None) -> str | None:
    """Render one release's variant (or every buildable one), all checked before any write.
    Without OUTPUT: return the one Dockerfile to print; with it, write each build context."""
    from builder import dockerfiles

    out = out or Output()
    options = {k: v for k, v in render.items() if k != "framework_src"}
    rendered_all = dockerfiles.render_release(rel, variant, render_options(rel, **options), out.say)
    if output is None:
        if len(rendered_all) > 1:
            raise UserError(f"release {rel.name} has {len(rendered_all)} variants: "
                            "give --variant to print one, or -o DIR to write them all")
        return rendered_all[0].dockerfile
    for rendered, path in zip(rendered_all, dockerfiles.write_contexts(rendered_all, output, render["framework_src"])):
        out.say(f"wrote {path} ({rendered.meta['image']})")
        out.result(str(path))
    return None


def run_bake(rel: Release, variant: str | None, render: dict, output: Path, build_id: str | None, *,
             out: Output | None = None) -> tuple[Path, str]:
    """`builder bake`: every buildable variant's context (or VARIANT's), the offline base's
    recipe, and OUTPUT/docker-bake.json binding them; returns the file and its text. A
    bake resolves the base inside BuildKit, so `--base auto` means the offline base here."""
    from builder import bake, dockerfiles, outputdir
    from builder.base import write_context
    from builder.base_recipe import BaseRecipe
    from builder.plan import check_build_id, default_build_id

    out = out or Output()
    options = {k: v for k, v in render.items() if k != "framework_src"}
    if options.get("base", "auto") == "auto":
        options["base"] = "offline"
    bid = default_build_id() if build_id is None else build_id
    check_build_id(bid)
    rendered_all = dockerfiles.render_release(rel, variant, render_options(rel, **options), out.say)
    layout = bake.Layout(output.resolve())
    definition = bake.definition(rel, rendered_all, layout, bid)
    text = json.dumps(definition, indent=2) + "\n"
    for rendered in rendered_all:  # all rendered and checked above, before any write
        buildcontext.write(rendered, layout.variant(rendered), render["framework_src"])
        out.say(f"wrote {layout.variant(rendered)} ({rendered.meta['image']})")
    try:
        if bake.base_target(rel) in definition["target"]:  # not with --base upstream or IMAGE
            write_context(BaseRecipe.for_release(rel), layout.base(rel))
        with outputdir.locked(layout.root):
            (layout.root / bake.BAKE_FILE).write_text(text)
    except OSError as exc:
        raise UserError(f"cannot write the bake definition to {layout.root}: {outputdir.oserror_text(exc)}") from None
    out.say(f"wrote {layout.root / bake.BAKE_FILE}")
    return layout.root / bake.BAKE_FILE, text


def run_render_all(catalog, output: Path | None, check: bool, *, out: Output | None = None) -> bool:
    """`render --all`: write (or, with CHECK, compare) dockerfiles/, or write every build
    context under OUTPUT; False when CHECK found drift. Writers of dockerfiles/ take turns."""
    from builder import dockerfiles, outputdir

    out = out or Output()
    root = paths.project_root()
    writing = output is None and not check
    with outputdir.locked(root / "dockerfiles") if writing else contextlib.nullcontext():
        result = dockerfiles.sync_all(catalog, root, output, check)
    if result.drift:
        out.say("\n".join(["dockerfiles/ differs from a fresh render (run `builder render --all`):",
                           *(f"  {d}" for d in result.drift)]))
        return False
    out.result(result.summary(check, output))
    return True
