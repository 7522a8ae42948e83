"""Plans: what a command will do, as a value computed from the catalog, the options and
the files they name (lock files, CA bundles, the framework source). Nothing here talks to
an engine, a registry or the network, so every plan is unit-tested without a daemon and
printed by `--dry-run`. A build's plan is complete: every variant rendered for the one
base --base names (auto: the offline base, on every machine), the base decision as data,
each image's job (job.ImageJob: build arguments, tags, the checks its read-back makes)
and where --push sends each tag; `builder.run` carries plans out.

    catalog + options --plan_*()--> Plan --run.*(plan, engine)--> images, tags, pushes
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from builder import components
from builder.catalog import Catalog, Release, Variant, policy
from builder.core import grammar, paths, provenance
from builder.core.errors import UserError
from builder.core.grammar import check_ref
from builder.engine import builders
from builder.engine.buildsettings import BackendAsks
from builder.image import buildcontext, runtime_image
from builder.plan.base_plan import BasePlan, plan_base
from builder.plan.build_args import (
    BUILDER_ARGS,
    PROXY_ARGS,
    check_build_args,
    declared_args,
    parse_build_args,
    proxy_credentials,
)
from builder.plan.derive_plan import DerivePlan, plan_derive
from builder.plan.keyword_only import keyword_only
from builder.plan.options_check import (
    baked_ca,
    check_backend,
    check_build_id,
    check_compile_cache,
    check_password_env,
    check_render_args,
    chosen_backend,
    default_build_id,
    parse_capabilities,
)
from builder.plan.push_plan import PushPlan, plan_push, push_ref
from builder.registry import target_ref
from builder.render import (
    Rendered,
    RenderOptions,
    check_base_option,
    jit_capabilities,
    render,
    render_options,
    resolve_cuda_cc,
    upstream_suffix,
)
from builder.render.base_recipe import BaseRecipe
from builder.render.job import Expectation, ImageJob, RenderedContext, requested_of

# the plan's checks and build arguments, where callers have always found them
__all__ = [
    "BUILDER_ARGS",
    "PROXY_ARGS",
    "BackendAsks",
    "baked_ca",
    "check_backend",
    "check_build_args",
    "check_build_id",
    "check_compile_cache",
    "check_password_env",
    "check_render_args",
    "chosen_backend",
    "declared_args",
    "default_build_id",
    "parse_build_args",
    "parse_capabilities",
    "proxy_credentials",
    "BaseDecision",
    "BaseOption",
    "BasePlan",
    "BuildArgs",
    "BuildPlan",
    "DerivePlan",
    "PushPlan",
    "VariantPlan",
    "base_decision",
    "plan_base",
    "plan_build",
    "plan_derive",
    "plan_push",
    "push_ref",
]


# --- build --------------------------------------------------------------------------------


@keyword_only
@dataclass(frozen=True)
class BuildArgs:
    """`builder build`'s options, as given (by keyword only)."""

    release: str
    variant: str | None = None
    all_variants: bool = False
    cuda_cc: str | None = None
    allow_ptx_jit: bool = False
    without: tuple[str, ...] = ()
    xla: bool | None = None
    gcp: bool | None = None
    hdfs: bool | None = None
    env: tuple[str, ...] = ()
    base: str = "auto"
    repo: str | None = None
    tags: tuple[str, ...] = ()
    build_id: str | None = None
    framework_src: Path | None = None
    platform: str = "linux/amd64"  # Docker's --platform: policy.why_not_platform says what is served
    no_cache: bool = False
    compile_cache: str | None = None
    push: bool = False  # --push: each built tag to the registry its reference names
    registry: str | None = None  # --registry HOST[:PORT][/NS] (with --push): the tags pushed under it
    push_to: str | None = None  # the library's shorthand for --push --registry PUSH_TO
    build_args: tuple[str, ...] = ()  # --build-arg NAME=VALUE, as given
    insecure_registry: bool = False
    baked_ca: tuple[str, ...] = ()  # PEM texts (--bake-ca with --ca-bundle)
    builders: str | None = None  # --builders A,B: --all's variants spread over these
    sbom: bool = False  # make each image's SBOM after it is tagged (the CLI's default)
    sign: Path | None = None  # --sign KEY: sign what --push pushed
    key_password_env: str = "COSIGN_PASSWORD"
    runtime: bool = False  # --runtime: also the runtime image of each variant
    runtime_only: bool = False  # --runtime-only: the runtime image, no devel image exported
    backend: BackendAsks = BackendAsks()  # --layer-cache, --builder, --compression


@dataclass(frozen=True)
class BaseOption:
    """One base a build stands on. OBTAIN: "pull" (used when here, else pulled when it
    can be) or "build" (the offline base: used when here, else built from its recipe)."""

    kind: str  # upstream | offline | custom
    image: str
    obtain: str
    description: str  # for the base line a build prints


@dataclass(frozen=True)
class BaseDecision:
    """The base a build stands on, as --base ASKED it, and the one line when it cannot be
    had. One option, whatever the machine: a tag names one recipe (`--base auto` is the
    offline base, which builds anywhere; the upstream base has its own default tag)."""

    options: tuple[BaseOption, ...]
    refusal: str = ""
    asked: str = "--base auto"


def base_decision(release: Release, base: str) -> BaseDecision:
    offline = BaseOption(
        "offline",
        BaseRecipe.for_release(release).tag,
        "build",
        f"offline base from Debian {release.offline.debian} (CUDA {release.offline.cuda})",
    )
    upstream = BaseOption("upstream", release.upstream_ref, "pull", f"upstream base {release.upstream_ref}")
    if base in ("auto", "offline"):
        return BaseDecision((offline,), asked=f"--base {base}")
    if base == "upstream":
        return BaseDecision(
            (upstream,),
            f"upstream base {release.upstream_ref} is not present and cannot be pulled "
            "(use --base offline on a machine without registry access)",
            asked="--base upstream",
        )
    return BaseDecision(
        (BaseOption("custom", base, "pull", f"--base {base}"),),
        f"base image '{base}' does not exist locally and cannot be pulled",
        asked=f"--base {base}",
    )


def default_refs(image: str, bid: str) -> tuple[str, ...]:
    """A variant's tags without -t: IMAGE (the render's: the upstream base's carries its OS)
    and IMAGE-BUILD_ID (a custom base has no default tags: plan_build asks for -t)."""
    return image, f"{image}-{bid}"


@dataclass(frozen=True)
class VariantPlan:
    variant: Variant
    renders: dict[str, Rendered]  # base kind -> the variant rendered for that base
    refs: tuple[str, ...]  # tagged on success, in this order
    # base kind -> the images built, in order: devel (unless --runtime-only), then runtime (--runtime)
    images: dict[str, tuple[ImageJob, ...]]

    @property
    def rendered(self) -> Rendered:
        """The render for the first base the decision tries (what the notes read)."""
        return next(iter(self.renders.values()))


@keyword_only
@dataclass(frozen=True)
class BuildPlan:
    """Everything a build does, decided before it starts (built by keyword only)."""

    release: Release
    variants: tuple[VariantPlan, ...]
    skipped: tuple[tuple[str, str], ...]  # (variant, why it cannot be built here)
    options: RenderOptions
    build_id: str
    base: str  # auto | upstream | offline | an image reference
    base_decision: BaseDecision
    recipe: BaseRecipe  # the offline base's
    framework_src: Path | None = None
    no_cache: bool = False
    compile_cache: str | None = None
    push_to: str | None = None  # --registry, when --push pushes under it
    insecure_registry: bool = False
    keep_going: bool = False  # --all: a failed variant does not stop the others
    builders: tuple[str, ...] = ()  # --builders: where --all's variants are spread
    sbom: bool = False
    sign: Path | None = None
    key_password_env: str = "COSIGN_PASSWORD"
    runtime: bool = False
    runtime_only: bool = False  # the devel stage is built inside the runtime image's build only
    # the builder's own build arguments, every variant's: where it is built from (BUILD_ID, BUILD_REF)
    builder_args: dict[str, str] = field(default_factory=dict)
    user_build_args: dict[str, str] = field(default_factory=dict)  # --build-arg (in each job's buildargs too)
    push: bool = False  # --push: pushes holds where each tag goes
    base_job: ImageJob | None = None  # the offline base's image, when the decision builds it
    pushes: dict[str, PushPlan] = field(default_factory=dict)  # --push: each image reference's push
    notes: tuple[str, ...] = ()  # said before anything is built


def has_extension(framework_src: Path | None) -> bool:
    """Whether the source tree carries the extension (its image must then hold it)."""
    src = Path(framework_src) if framework_src else paths.framework_src_dir()
    return (src / "python" / "tfext" / "__init__.py").is_file()


def for_base(options: RenderOptions, release: Release, option: BaseOption) -> RenderOptions:
    """The render options for a variant standing on OPTION."""
    return dataclasses.replace(
        options,
        base=option.kind if option.kind != "custom" else option.image,
        offline_base_image=BaseRecipe.for_release(release).tag,
    )


def variant_jobs(
    release: Release, rendered: Rendered, refs: tuple[str, ...], args: BuildArgs, buildargs: dict[str, str]
) -> tuple[ImageJob, ImageJob]:
    """The devel and runtime images' jobs of one render: built from the same context, read
    back against the same catalog entry; the runtime one reuses the devel build's cache
    (no --no-cache after it) and takes the devel stage from the devel image."""
    meta, name = rendered.meta, f"{release.name}-{rendered.variant}-{buildargs['BUILD_ID']}"
    variant = release.variant(rendered.variant)
    context = RenderedContext(rendered, args.framework_src)
    expect = Expectation(
        release,
        variant,
        requested_of(meta["cuda_compute_capabilities"]),
        meta["toggles"],
        extension=has_extension(args.framework_src),
        base_image=meta["base_image"],
        components=tuple(meta["components"]),
    )
    args_here = {"BASE_IMAGE": meta["base_image"], **buildargs, "COMPILE_CACHE": args.compile_cache or ""}
    devel = ImageJob(
        f"{release.name}/{rendered.variant}",
        context,
        f"{name}.log",
        args_here,
        args.compile_cache,
        cache_key=f"{release.name}-{rendered.variant}",
        target=meta["target"],
        nocache=args.no_cache,
        expect=expect,
        refs=refs,
        dated=True,
    )
    devel_image = None if args.runtime_only else refs[0]
    runtime = ImageJob(
        f"{release.name}/{rendered.variant} runtime",
        context,
        f"{name}{runtime_image.SUFFIX}.log",
        {**args_here, "DEVEL_IMAGE": refs[0]},
        args.compile_cache,
        target=runtime_image.STAGE,
        devel_image=devel_image,
        nocache=args.no_cache and args.runtime_only,
        expect=dataclasses.replace(
            expect,
            coverage=False,
            runtime=True,
            devel_image=devel_image,
            # what nvbuild.sh installed with pip is there too; what the devel stage's apt installed is not
            components=tuple(n for n in meta["components"] if components.get(n).RUNTIME),
        ),
        refs=tuple(runtime_image.refs_for(refs)),
        dated=True,
    )
    return devel, runtime


def jit_note(release: Release, variant: Variant, options: RenderOptions) -> str | None:
    """What runs by PTX JIT, for every base --base may pick (auto: the older toolkit's say)."""
    jit = jit_capabilities(release, options)
    built = resolve_cuda_cc(release, options) if jit else "none"  # the renders resolved it already
    if isinstance(built, str):
        return None
    return (
        f"note: {variant.name}: {', '.join(jit)} will run by PTX JIT of compute_"
        f"{built[-1].replace('.', '')} (--allow-ptx-jit); SASS for {', '.join(built)}"
    )


def plan_build(catalog: Catalog, args: BuildArgs, now: float | None = None) -> BuildPlan:
    """Check every option and render every variant for the base it stands on (all before
    anything is built)."""
    rel = catalog.get(args.release)
    if args.all_variants and args.variant:
        raise UserError("--all and --variant exclude each other")
    if args.all_variants and args.tags:
        raise UserError("--tag names one image; it cannot go with --all")
    push, registry = args.push or bool(args.push_to), args.registry or args.push_to
    if registry and not push:
        raise UserError(
            "--registry says where --push pushes: give --push too (or push later with "
            "`builder push IMAGE --registry R`)"
        )
    if args.sign and not push:
        raise UserError(
            "--sign signs what --push pushes: give --push too, or sign later with `builder push IMAGE --sign KEY`"
        )
    if args.base not in ("auto", "offline", "upstream") and args.all_variants:
        check_base_option(args.base)
        raise UserError(
            f"--base {grammar.printable(args.base)} with --all: a custom base makes images other than "
            "the release's, each needing its own tag: build one variant at a time (--variant V -t NAME:TAG)"
        )
    if args.base not in ("auto", "offline", "upstream") and not args.tags:
        check_base_option(args.base)
        raise UserError(
            f"--base {grammar.printable(args.base)}: a custom base makes a different image than the "
            "release's, so it needs its own tag: give -t/--tag NAME:TAG"
        )
    if args.runtime:
        why = policy.why_no_runtime_image(rel)
        if why:
            raise UserError(f"--runtime: {why}")
        if args.base not in ("auto", "offline"):
            raise UserError("--runtime stands on the offline base's Debian: give --base offline (or leave --base out)")
        if args.all_variants:
            raise UserError("--runtime builds one variant's runtime image: give --variant, not --all")
    if args.builders is not None and not args.all_variants:
        raise UserError("--builders spreads the variants of --all over builders: for one image use --builder NAME")
    check_backend(args.backend, args.builders)
    spread = builders.parse(args.builders) if args.builders is not None else ()
    skipped: list[tuple[str, str]] = []
    if args.variant:
        variants = [rel.variant(args.variant)]
    elif args.all_variants:  # --all builds what can be built here and says why it skips the rest
        variants, skipped = policy.buildable_variants(rel)
    else:
        variants = [rel.variant("tf2-py3" if "tf2-py3" in rel.variants else next(iter(rel.variants)))]
    bid = default_build_id(now) if args.build_id is None else args.build_id
    check_build_id(bid)
    for t in args.tags:
        check_ref(t, "--tag", tag=True)
    if not args.tags:  # each variant is also tagged TAG-BUILD_ID: that tag must be valid too
        suffix = upstream_suffix(rel) if args.base == "upstream" else ""
        for v in variants:
            why = grammar.tag_problem(f"{v.tag}{suffix}-{bid}")
            if why:
                raise UserError(
                    f"the build-id tag {grammar.printable(f'{v.tag}{suffix}-{bid}')} {why}: give a shorter --build-id"
                )
    if args.framework_src is not None and not args.framework_src.is_dir():
        raise UserError(f"--framework-src {args.framework_src} is not a directory")
    buildcontext.check_tree(args.framework_src or paths.framework_src_dir())  # no host files in the image
    tree = args.framework_src or paths.framework_src_dir()
    why = policy.why_not_platform(
        rel, args.platform, (tree / "configure.py").is_file() and (tree / "tensorflow").is_dir()
    )
    if why:
        raise UserError(why)
    check_base_option(args.base)
    check_compile_cache(args.compile_cache)
    if registry:
        target_ref("x:y", registry, None)  # the registry's grammar, before building
    user_args = parse_build_args(args.build_args)
    # --base auto is the offline base on every machine: rendered (and its notes made) for it
    opts = render_options(
        rel,
        args.cuda_cc,
        args.xla,
        args.gcp,
        args.hdfs,
        args.env,
        "offline" if args.base == "auto" else args.base,
        args.repo,
        args.baked_ca,
        args.allow_ptx_jit,
        args.without,
    )
    decision, recipe = base_decision(rel, args.base), BaseRecipe.for_release(rel)
    own_args = {"BUILD_ID": bid, "BUILD_REF": provenance.source_ref()}  # BUILD_DATE: when each build starts
    planned = []
    for v in variants:  # every render problem is reported before anything is built
        renders = {o.kind: render(rel, v, for_base(opts, rel, o)) for o in decision.options}
        for rendered in renders.values():
            check_build_args(user_args, rendered.dockerfile)
        image = next(iter(renders.values())).meta["image"]
        refs = tuple(args.tags) or default_refs(image, bid)
        images = {}
        for kind, rendered in renders.items():
            devel, runtime = variant_jobs(rel, rendered, refs, args, {**user_args, **own_args})
            images[kind] = (() if args.runtime_only else (devel,)) + ((runtime,) if args.runtime else ())
        planned.append(VariantPlan(v, renders, refs, images))
    password_env = check_password_env(args.key_password_env)
    notes = tuple(n for n in (jit_note(rel, vp.variant, opts) for vp in planned) if n)
    pushes = (
        {
            ref: PushPlan(ref, push_ref(ref, registry), 4, args.insecure_registry, args.sign, password_env)
            for vp in planned
            for jobs in vp.images.values()
            for job in jobs
            for ref in job.refs
        }
        if push
        else {}
    )
    base_job = recipe.job() if any(o.obtain == "build" for o in decision.options) else None
    if base_job is not None and user_args:  # the base's downloads go through the same proxy
        proxies = {k: v for k, v in user_args.items() if k in PROXY_ARGS}
        base_job = dataclasses.replace(base_job, buildargs={**proxies, **base_job.buildargs})
    return BuildPlan(
        release=rel,
        variants=tuple(planned),
        skipped=tuple(skipped),
        options=opts,
        build_id=bid,
        base=args.base,
        base_decision=decision,
        framework_src=args.framework_src,
        no_cache=args.no_cache,
        compile_cache=args.compile_cache,
        push_to=registry,
        insecure_registry=args.insecure_registry,
        keep_going=args.all_variants,
        builders=spread,
        sbom=args.sbom,
        sign=args.sign,
        key_password_env=password_env,
        runtime=args.runtime,
        runtime_only=args.runtime_only,
        builder_args=own_args,
        user_build_args=user_args,
        push=push,
        recipe=recipe,
        base_job=base_job,
        pushes=pushes,
        notes=notes,
    )
