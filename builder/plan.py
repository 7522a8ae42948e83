"""Plans: what a command will do, as a pure value computed from the catalog and the
options. Nothing here talks to an engine, a registry or the network, so every plan is
unit-tested without a daemon and printed by `--dry-run`; `builder.run` carries plans out.

    catalog + options --plan_*()--> Plan --run.*(plan, engine)--> images, tags, pushes
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder import cuda_arch, grammar, lock, urls
from builder.base_recipe import BaseRecipe
from builder.catalog import Catalog, Release, Variant
from builder.errors import UserError
from builder.render import RenderOptions, Rendered, check_base_option, render

if TYPE_CHECKING:
    from builder.derive import DeriveSpec


def default_build_id(now: float | None = None) -> str:
    return time.strftime("%Y%m%d.%H%M%S", time.gmtime(now))


def check_build_id(bid: str) -> None:
    if not grammar.BUILD_ID.fullmatch(bid):
        raise UserError(f"--build-id {grammar.shown(bid)} may hold only letters, digits, '_', '.' and '-' "
                        "(64 at most, not starting with '.' or '-')")


def check_ref(ref: str, what: str, image_id: bool = False) -> None:
    """REF must be an image reference by Docker's grammar (or, where allowed, an image id)."""
    if image_id and grammar.IMAGE_ID.fullmatch(ref):
        return
    why = grammar.reference_problem(ref)
    if why:
        raise UserError(f"{what} {grammar.shown(ref)} {why}")


def check_compile_cache(url: str | None) -> None:
    if url:  # it is a build arg: credentials in it would land in docker history and the log
        urls.check_url(url, "--compile-cache", "and a compile-cache URL is a build argument, so they would also land "
                       "in docker history and the build log: builds on the cache's own machine write without "
                       "credentials (see `builder cache serve --help`)")


# --- the build backend --------------------------------------------------------------------

@dataclass(frozen=True)
class BackendAsks:
    """What the build-settings options ask of the build backend: each only BuildKit does."""

    layer_cache: str | None = None   # --layer-cache: BuildKit's registry cache
    builder: str | None = None       # --builder: another buildx builder
    compression: str = "gzip"        # --compression zstd: BuildKit's exporter


def chosen_backend() -> tuple[str, str]:
    """The backend builds will use, as buildkit_engine.connect() chooses it but without the
    engine (BUILDER_BACKEND, then whether the Docker CLI has buildx); for the legacy
    builder, why it is the one."""
    from builder import buildkit_engine as bk

    if bk.backend_wanted() == "legacy":
        return "legacy", "BUILDER_BACKEND=legacy"
    if not bk.buildx_version():
        return "legacy", "docker buildx is not installed"
    return "buildkit", ""


def check_backend(asks: BackendAsks, builders: str | None = None) -> None:
    """Options the legacy builder cannot honour are refused here, in the plan, so that
    --dry-run and --print refuse them too and nothing (a base pulled, the settings server
    started) happens first. BUILDERS: --builders, one bake each (the legacy builder has no bake)."""
    from builder.buildx import COMPRESSIONS

    only_buildkit = {"--layer-cache": asks.layer_cache, "--builder": asks.builder,
                     f"--compression {asks.compression}": asks.compression in set(COMPRESSIONS) - {"gzip"},
                     "--builders": builders}
    asked = [option for option, wanted in only_buildkit.items() if wanted]
    if asks.builder and builders:
        raise UserError("--builder and --builders exclude each other: give the builders with --builders A,B")
    if not asked:
        return
    backend, why = chosen_backend()
    if backend != "buildkit":
        raise UserError(f"{asked[0]} needs the BuildKit backend (docker buildx); builds here use the legacy "
                        f"builder ({why}; `builder doctor` says more)")


def render_options(release: Release | None, cuda_cc: str | None = None, xla: bool | None = None,
                   gcp: bool | None = None, hdfs: bool | None = None, env: list[str] | tuple[str, ...] | None = (),
                   base: str = "auto", repo: str | None = None, baked_ca: tuple[str, ...] = (),
                   allow_ptx_jit: bool = False) -> RenderOptions:
    return RenderOptions(cuda_cc=cuda_cc, xla=xla, gcp=gcp, hdfs=hdfs, env=RenderOptions.parse_env(list(env or ())),
                         base=base, repository=repo, baked_ca=baked_ca, allow_ptx_jit=allow_ptx_jit,
                         offline_base_image=BaseRecipe.for_release(release).tag if release is not None else None)


def buildable_variants(release: Release) -> tuple[list[Variant], list[tuple[str, str]]]:
    """The variants that can be built here, and (name, reason) for the others."""
    ok, skipped = [], []
    for v in release.variants.values():
        reason = lock.refusal(release, v)
        if reason:
            skipped.append((v.name, reason))
        else:
            ok.append(v)
    return ok, skipped


def check_render_args(release: str | None, variant: str | None, render: dict, all_: bool, check: bool) -> None:
    """`builder render`: --all renders the catalog as it is; anything else names a release."""
    if check and not all_:
        raise UserError("--check goes with --all")
    if all_ and (release or variant or any(v for k, v in render.items() if k != "base") or render["base"] != "auto"):
        raise UserError("--all renders the catalog as it is; it takes no --release, --variant or render options")
    if not all_ and not release:
        raise UserError("give --release R (or --all)")


# --- build --------------------------------------------------------------------------------

@dataclass(frozen=True)
class BuildArgs:
    """`builder build`'s options, as given."""

    release: str
    variant: str | None = None
    all_variants: bool = False
    cuda_cc: str | None = None
    allow_ptx_jit: bool = False
    xla: bool | None = None
    gcp: bool | None = None
    hdfs: bool | None = None
    env: tuple[str, ...] = ()
    base: str = "auto"
    repo: str | None = None
    tags: tuple[str, ...] = ()
    build_id: str | None = None
    framework_src: Path | None = None
    no_cache: bool = False
    compile_cache: str | None = None
    push_to: str | None = None
    insecure_registry: bool = False
    baked_ca: tuple[str, ...] = ()  # PEM texts (--bake-ca with --ca-bundle)
    builders: str | None = None     # --builders A,B: --all's variants spread over these
    sbom: bool = False              # make each image's SBOM after it is tagged (the CLI's default)
    sign: Path | None = None        # --sign KEY: sign what --push pushed
    key_password_env: str = "COSIGN_PASSWORD"
    runtime: bool = False           # --runtime: also the runtime image of each variant
    runtime_only: bool = False      # --runtime-only: the runtime image, no devel image exported
    backend: BackendAsks = BackendAsks()  # --layer-cache, --builder, --compression


@dataclass(frozen=True)
class VariantPlan:
    variant: Variant
    rendered: Rendered
    refs: tuple[str, ...]  # tagged on success, in this order

    @property
    def image(self) -> str:
        return self.rendered.meta["image"]


@dataclass(frozen=True)
class BuildPlan:
    release: Release
    variants: tuple[VariantPlan, ...]
    skipped: tuple[tuple[str, str], ...]  # (variant, why it cannot be built here)
    options: RenderOptions
    build_id: str
    base: str  # auto | upstream | offline | an image reference
    framework_src: Path | None = None
    no_cache: bool = False
    compile_cache: str | None = None
    push_to: str | None = None
    insecure_registry: bool = False
    keep_going: bool = False  # --all: a failed variant does not stop the others
    builders: tuple[str, ...] = ()  # --builders: where --all's variants are spread
    sbom: bool = False
    sign: Path | None = None
    key_password_env: str = "COSIGN_PASSWORD"
    runtime: bool = False
    runtime_only: bool = False  # the devel stage is built inside the runtime image's build only

    @property
    def checks(self) -> tuple[str, ...]:
        return ("read-back",)

    def dry_run(self, base_image: str, base_kind: str, build_base: bool) -> list[dict]:
        def tags(v: VariantPlan) -> list[str]:
            from builder.runtime import refs_for

            runtime = refs_for(list(v.refs)) if self.runtime else []
            return runtime if self.runtime_only else list(v.refs) + runtime

        return [{"release": self.release.name, "variant": v.variant.name, "base": base_image, "base_kind": base_kind,
                 "build_base": build_base, "tags": tags(v), "build_id": self.build_id} for v in self.variants]


def plan_build(catalog: Catalog, args: BuildArgs, now: float | None = None) -> BuildPlan:
    """Check every option and render every variant (all before anything is built)."""
    rel = catalog.get(args.release)
    if args.all_variants and args.variant:
        raise UserError("--all and --variant exclude each other")
    if args.all_variants and args.tags:
        raise UserError("--tag names one image; it cannot go with --all")
    if args.sign and not args.push_to:
        raise UserError("--sign signs what --push pushes: give --push REGISTRY too, or sign later with "
                        "`builder push IMAGE --registry R --sign KEY`")
    if args.runtime:
        from builder import runtime

        why = runtime.refusal(rel)
        if why:
            raise UserError(f"--runtime: {why}")
        if args.base not in ("auto", "offline"):
            raise UserError("--runtime stands on the offline base's Debian: give --base offline (or leave --base out)")
        if args.all_variants:
            raise UserError("--runtime builds one variant's runtime image: give --variant, not --all")
    if args.builders is not None and not args.all_variants:
        raise UserError("--builders spreads the variants of --all over builders: for one image use --builder NAME")
    check_backend(args.backend, args.builders)
    from builder import builders

    spread = builders.parse(args.builders) if args.builders is not None else ()
    skipped: list[tuple[str, str]] = []
    if args.variant:
        variants = [rel.variant(args.variant)]
    elif args.all_variants:  # --all builds what can be built here and says why it skips the rest
        variants, skipped = buildable_variants(rel)
    else:
        variants = [rel.variant("tf2-py3" if "tf2-py3" in rel.variants else next(iter(rel.variants)))]
    bid = default_build_id(now) if args.build_id is None else args.build_id
    check_build_id(bid)
    for t in args.tags:
        check_ref(t, "--tag")
    if not args.tags:  # each variant is also tagged TAG-BUILD_ID: that tag must be valid too
        for v in variants:
            why = grammar.tag_problem(f"{v.tag}-{bid}")
            if why:
                raise UserError(f"the build-id tag {grammar.shown(f'{v.tag}-{bid}')} {why}: give a shorter --build-id")
    if args.framework_src is not None and not args.framework_src.is_dir():
        raise UserError(f"--framework-src {args.framework_src} is not a directory")
    check_base_option(args.base)
    check_compile_cache(args.compile_cache)
    if args.push_to:
        from builder.registry import target_ref

        target_ref("x:y", args.push_to, None)  # the registry's grammar, before building
    opts = render_options(rel, args.cuda_cc, args.xla, args.gcp, args.hdfs, args.env, args.base, args.repo,
                          args.baked_ca, args.allow_ptx_jit)
    planned = []
    for v in variants:  # every render problem is reported before anything is built
        rendered = render(rel, v, opts)  # a layered release's render holds its runtime stage too
        image = rendered.meta["image"]
        planned.append(VariantPlan(v, rendered, tuple(args.tags) or (image, f"{image}-{bid}")))
    return BuildPlan(rel, tuple(planned), tuple(skipped), opts, bid, args.base, args.framework_src,
                     args.no_cache, args.compile_cache, args.push_to, args.insecure_registry,
                     keep_going=args.all_variants, builders=spread, sbom=args.sbom, sign=args.sign,
                     key_password_env=check_password_env(args.key_password_env), runtime=args.runtime,
                     runtime_only=args.runtime_only)


def baked_ca(bake_ca: bool, ca_bundles: list[Path] | None) -> tuple[str, ...]:
    """The PEM texts --bake-ca installs in the image."""
    if not bake_ca:
        return ()
    if not ca_bundles:
        raise UserError("--bake-ca needs at least one --ca-bundle")
    return tuple(Path(p).read_text() for p in ca_bundles)


# --- derive -------------------------------------------------------------------------------

@dataclass(frozen=True)
class DerivePlan:
    parent: str
    tag: str
    spec: DeriveSpec
    compile_cache: str | None = None
    no_cache: bool = False
    test: bool = True
    sbom: bool = False  # make its SBOM once it is tagged (the CLI's default)

    @property
    def checks(self) -> tuple[str, ...]:
        return ("patches apply", "read-back") + (("conformance",) if self.test else ())

    @property
    def log_name(self) -> str:
        return f"derive-{self.tag.replace('/', '_').replace(':', '_')}.log"


def plan_derive(parent: str, tag: str, patches: list[Path] = (), horovod_patches: list[Path] = (),
                apt: list[str] = (), pip: list[str] = (), nvbuild_args: str | None = None,
                compile_cache: str | None = None, no_cache: bool = False, test: bool = True,
                sbom: bool = False, backend: BackendAsks = BackendAsks()) -> DerivePlan:
    from builder.derive import DeriveSpec, parse_nvbuild_args

    check_backend(backend)
    spec = DeriveSpec(parent=parent, patches=list(patches), horovod_patches=list(horovod_patches),
                      apt=list(apt), pip=list(pip), nvbuild_args=parse_nvbuild_args(nvbuild_args))
    spec.validate()
    check_ref(parent, "--from", image_id=True)
    check_ref(tag, "--tag")
    check_compile_cache(compile_cache)
    return DerivePlan(parent, tag, spec, compile_cache, no_cache, test, sbom)


# --- push ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PushPlan:
    image: str
    ref: str  # where it goes: REGISTRY/NAME:TAG
    tries: int = 4
    insecure: bool = False
    sign: Path | None = None             # --sign KEY: cosign private key
    key_password_env: str = "COSIGN_PASSWORD"


def plan_push(image: str, registry: str, tag: str | None = None, tries: int = 4, insecure: bool = False,
              sign: Path | None = None, key_password_env: str = "COSIGN_PASSWORD") -> PushPlan:
    from builder.registry import check_tries, target_ref

    check_ref(image, "IMAGE", image_id=True)  # before the engine is asked for it
    return PushPlan(image, target_ref(image, registry, tag), check_tries(tries), insecure, sign,
                    check_password_env(key_password_env))


def check_password_env(name: str) -> str:
    if not grammar.matches(grammar.ENV_NAME, name):
        raise UserError(f"--key-password-env {grammar.shown(name)}: not an environment variable name")
    return name


# --- base ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class BasePlan:
    release: str
    recipe: BaseRecipe
    rebuild: bool = False

    @property
    def tag(self) -> str:
        return self.recipe.tag


def plan_base(catalog: Catalog, release: str, rebuild: bool = False, backend: BackendAsks = BackendAsks()) -> BasePlan:
    rel = catalog.get(release)
    check_backend(backend)
    return BasePlan(rel.name, BaseRecipe.for_release(rel), rebuild)


def parse_capabilities(text: str | None, what: str = "--cuda-cc") -> list[str]:
    """An explicit list of compute capabilities (no 'all' or 'local')."""
    if not text:
        return []
    try:
        parsed = cuda_arch.parse(text)
    except cuda_arch.ArchError as exc:
        raise UserError(f"{what}: {exc}") from None
    if isinstance(parsed, str):
        raise UserError(f"{what} takes a list of capabilities here")
    return parsed

