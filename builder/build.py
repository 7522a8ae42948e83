"""`builder build`: render a release variant, pick its base, build it on the engine and
tag it only when the build succeeded.
"""
from __future__ import annotations

import dataclasses
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from builder import buildcontext, buildsettings, paths, readback
from builder.base import ensure_base, log
from builder.base_recipe import BaseRecipe
from builder.catalog import Release, Variant
from builder.engine import BuildRequest, Engine, Progress
from builder.errors import BuildError
from builder.errors import UserError
from builder.provenance import BASE_DIGEST
from builder.render import RenderOptions, render


def source_ref() -> str:
    """The builder checkout's commit (with -dirty when it has uncommitted changes)."""
    root = paths.project_root()
    try:
        rev = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return rev.stdout.strip() or "unknown"


@dataclass
class BaseChoice:
    kind: str      # upstream | offline | custom
    image: str
    reason: str
    needs_build: bool = False


@dataclass
class BuildOutcome:
    release: str
    variant: str
    image_id: str = ""
    refs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""


def choose_base(engine: Engine, release: Release, base: str, dry_run: bool) -> BaseChoice:
    recipe = BaseRecipe.for_release(release)
    offline_reason = f"offline base from Debian {release.offline.debian} (CUDA {release.offline.cuda})"
    if base == "offline":
        present = engine.image_id(recipe.tag) is not None
        return BaseChoice("offline", recipe.tag, f"--base offline: {offline_reason}"
                          + ("" if present else ", to be built"), needs_build=not present)
    if base in ("auto", "upstream"):
        upstream = release.upstream_ref
        if engine.image_id(upstream):
            return BaseChoice("upstream", upstream, f"upstream base {upstream} is present locally")
        if not dry_run and engine.pull(upstream):
            return BaseChoice("upstream", upstream, f"pulled upstream base {upstream}")
        if base == "upstream":
            raise UserError(f"upstream base {upstream} is not present and cannot be pulled "
                            "(use --base offline on a machine without registry access)")
        present = engine.image_id(recipe.tag) is not None
        why = "not present locally" + (" (pull not tried: --dry-run)" if dry_run else " and cannot be pulled")
        return BaseChoice("offline", recipe.tag, f"upstream base {upstream} is {why}; using the {offline_reason}"
                          + ("" if present else ", to be built"), needs_build=not present)
    if engine.image_id(base) or (not dry_run and engine.pull(base)):
        return BaseChoice("custom", base, f"--base {base}")
    raise UserError(f"base image '{base}' does not exist locally and cannot be pulled")


def options_for(options: RenderOptions, release: Release, base: BaseChoice) -> RenderOptions:
    """The render options for the base that was chosen."""
    return dataclasses.replace(options, base=base.kind if base.kind != "custom" else base.image,
                               offline_base_image=BaseRecipe.for_release(release).tag)


def provenance_args() -> dict[str, str]:
    """The build arguments that say where and when an image was built."""
    return {"BUILD_REF": source_ref(), "BUILD_DATE": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def build_variant(engine: Engine, release: Release, variant: Variant, options: RenderOptions, *,
                  base: BaseChoice, settings: buildsettings.BuildSettings, build_id: str, refs: list[str],
                  nocache: bool, framework_src: Path | None, quiet: bool,
                  compile_cache: str | None = None) -> BuildOutcome:
    """Build one variant on an existing base; tag it REFS (the plan's) only on success."""
    rendered = render(release, variant, options_for(options, release, base))  # the base it renders for is chosen now
    log_path = paths.logs_dir() / f"{release.name}-{variant.name}-{build_id}.log"
    with tempfile.TemporaryDirectory(prefix=f"builder-{release.name}-{variant.name}-") as tmp:
        context = buildcontext.write(rendered, Path(tmp) / "context", framework_src)
        buildargs = {"BASE_IMAGE": base.image, "BUILD_ID": build_id, **provenance_args()}
        with buildsettings.deliver(settings, engine.backend) as delivery:
            buildargs["BUILD_SETTINGS"] = delivery.url or ""
            buildargs["COMPILE_CACHE"] = compile_cache or ""
            request = BuildRequest(context=context, buildargs=buildargs, nocache=nocache,
                                   network_mode=delivery.network_mode(compile_cache),
                                   log_path=log_path, quiet=quiet, secrets=delivery.secrets,
                                   cache_ref=settings.cache_ref(f"{release.name}-{variant.name}"),
                                   builder=settings.builder, compression=settings.compression,
                                   target=rendered.meta["target"])
            result = engine.build(request, Progress(f"{release.name}/{variant.name}", quiet=quiet))
    return finish_variant(engine, release, variant, rendered.meta, result.image_id, refs, log_path, framework_src,
                          result.seconds, settings.compression)


def finish_variant(engine: Engine, release: Release, variant: Variant, meta: dict, image_id: str, refs: list[str],
                   log_path: Path, framework_src: Path | None, seconds: float = 0.0,
                   compression: str = "gzip") -> BuildOutcome:
    """A built, untagged variant image: read back, labelled, then tagged REFS."""
    image_id = verify_and_label(engine, image_id, release, variant, meta, log_path,
                                expect_extension=has_extension(framework_src),
                                compression=compression)
    for ref in refs:
        engine.tag(image_id, ref)
    return BuildOutcome(release.name, variant.name, image_id, refs, seconds)


def has_extension(framework_src: Path | None) -> bool:
    """Whether the source tree carries the extension (its image must then hold it)."""
    src = Path(framework_src) if framework_src else paths.framework_src_dir()
    return (src / "python" / "tfext" / "__init__.py").is_file()


def verify_and_label(engine: Engine, image_id: str, release: Release, variant: Variant, meta: dict,
                     log_path: Path, expect_extension: bool = True, compression: str = "gzip",
                     coverage: bool = True, extra_labels: dict[str, str] | None = None) -> str:
    """Read what the untagged image holds, refuse it when it disagrees with the catalog,
    and label it with what it reported (and EXTRA_LABELS); returns the labelled image's id.
    The label step exports the image again: with the build's COMPRESSION (BuildKit would
    otherwise turn zstd layers back into gzip). COVERAGE=False: the image has no cuobjdump
    (a runtime image), its CUDA binaries are not listed."""
    requested = meta["cuda_compute_capabilities"]
    requested = [] if isinstance(requested, str) else list(requested)
    try:
        report = readback.read_report(engine, image_id, requested, coverage=coverage, store=paths.readback_store())
    except UserError as exc:  # an image that cannot say what it holds is a failed build, not bad input
        raise BuildError(str(exc), step="read-back check", log_path=log_path) from None
    verdict = readback.check(report, release, variant, requested, meta["toggles"], expect_extension)
    for warning in verdict.warnings:
        log(f"warning: {warning}")
    if verdict.problems:
        raise BuildError(f"the built image does not match release {release.name} {variant.name}: "
                         f"{verdict.problems[0]}", step="read-back check", tail=verdict.problems, log_path=log_path)
    labels = {**readback.measured_labels(report), **(extra_labels or {})}
    if meta.get("base_image"):  # the provenance names the base by digest (builder push --sign)
        labels[BASE_DIGEST] = image_digest(engine, meta["base_image"])
    return add_labels(engine, image_id, labels, log_path, compression)


def image_digest(engine: Engine, ref: str) -> str:
    """A registry's digest of REF when it came from one, else this engine's id (sha256:...)."""
    info = engine.inspect(ref)
    for repo_digest in info.get("RepoDigests") or []:
        return repo_digest.split("@", 1)[1]
    return info["Id"]


def add_labels(engine: Engine, image_id: str, labels: dict[str, str], log_path: Path,
               compression: str = "gzip") -> str:
    """A label-only image on top of IMAGE_ID (no new layer)."""
    from builder.quoting import FILTERS, QuotingError

    try:  # the values are what the image reported: written quoted, or refused
        lines = " \\\n      ".join(f"{FILTERS['label_key'](k)}={FILTERS['dq'](v)}" for k, v in labels.items())
    except QuotingError as exc:
        raise BuildError(f"the image reported a label value that cannot be written: {exc}",
                         step="read-back check", log_path=log_path) from None
    with tempfile.TemporaryDirectory(prefix="builder-labels-") as tmp:
        # FROM through an ARG: BuildKit backends give an image id a temporary tag to resolve
        (Path(tmp) / "Dockerfile").write_text(f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\nLABEL {lines}\n",
                                             encoding="utf-8")
        request = BuildRequest(context=Path(tmp), buildargs={"BASE_IMAGE": FILTERS['ref'](image_id)},
                               nocache=False, network_mode=None,
                               log_path=log_path.with_suffix(".labels.log"), quiet=True, compression=compression)
        labelled = engine.build(request, Progress("labels", quiet=True)).image_id
    forget_unlabelled(engine, image_id, labelled)
    return labelled


def forget_unlabelled(engine: Engine, image_id: str, labelled: str) -> None:
    """The unlabelled image the label step stood on is this build's own and untagged: on
    the containerd store it would stay behind as one more <none> image per build. Best
    effort: the classic store refuses (it is the labelled image's parent), and on the
    containerd store it may be gone already (with the temporary tag BuildKit's label step
    gave it); both are fine."""
    if image_id == labelled:
        return
    try:
        if not engine.inspect(image_id).get("RepoTags"):
            engine.remove_image(image_id)
    except (Exception, UserError):  # noqa: BLE001 - tidying only; the build has succeeded
        pass


def prepare_base(engine: Engine, release: Release, choice: BaseChoice,
                 settings: buildsettings.BuildSettings, quiet: bool) -> None:
    if choice.needs_build:
        log(f"base: building {choice.image}")
        ensure_base(engine, BaseRecipe.for_release(release), settings, quiet=quiet)
