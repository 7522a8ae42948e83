"""The one image pipeline: `produce(engine, job)` writes a job's context, hands the build
settings over, builds untagged, reads the image back, checks it against the job's
expectation, labels it with what it reported and only then tags it. The offline base,
release variants, runtime images and derived images all go through it; a bake's images
(bake_build.py) go through its second half, `finish`.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from builder.core import paths, provenance
from builder.core.contract import Label
from builder.core.errors import BuildError, BuildFailure, UserError
from builder.core.provenance import BASE_DIGEST
from builder.core.quoting import FILTERS, QuotingError
from builder.core.terminal import say
from builder.engine import BuildRequest, ImageStore, Progress, ProgressMode, buildsettings
from builder.image import buildcontext, readback, runtime_image
from builder.image.conformance import runner
from builder.render.job import Context, Expectation, FilesContext, ImageJob, RenderedContext


@dataclass(frozen=True)
class Produced:
    image_id: str
    seconds: float = 0.0


def produce(engine, job: ImageJob, settings: buildsettings.BuildSettings, progress: ProgressMode) -> Produced:
    """Build JOB untagged, then `finish` it: read back, checked, labelled, tagged."""
    image_id, seconds = build(engine, job, settings, progress)
    return Produced(finish(engine, job, image_id, settings.compression), seconds)


def build(engine, job: ImageJob, settings: buildsettings.BuildSettings, progress: ProgressMode) -> tuple[str, float]:
    """Build JOB untagged; (image id, seconds). The settings reach the build as BuildKit
    secrets (or the legacy builder's loopback URL), never as a layer or a build argument."""
    with tempfile.TemporaryDirectory(prefix="builder-") as tmp:
        context = write_context(job.context, Path(tmp) / "context")
        with buildsettings.deliver(settings, engine.backend) as delivery:
            args = {**job.buildargs, **({"BUILD_DATE": provenance.build_date()} if job.dated else {})}
            request = BuildRequest(
                context=context,
                buildargs={**args, "BUILD_SETTINGS": delivery.url or ""},
                nocache=job.nocache,
                network_mode=delivery.network_mode(job.compile_cache),
                log_path=log_file(job),
                progress=progress,
                secrets=delivery.secrets,
                cache_ref=settings.cache_ref(job.cache_key) if job.cache_key else None,
                builder=settings.builder,
                compression=settings.compression,
                target=job.target,
                contexts=_named_contexts(engine, settings, job),
            )
            result = engine.build(request, Progress(job.label, mode=progress))
    return result.image_id, result.seconds


def log_file(job: ImageJob) -> Path:
    return paths.logs_dir() / job.log_name


def write_context(context: Context, dest: Path) -> Path:
    if isinstance(context, RenderedContext):
        return buildcontext.write(context.rendered, dest, context.framework_src)
    return write_files(context, dest)


def write_files(context: FilesContext, dest: Path, root: Path | None = None, header: dict | None = None) -> Path:
    """A files context (the base recipe's, a derived image's) on disk, by the one writer
    of contexts: no link followed below ROOT, nothing written over a file it did not write."""
    return buildcontext.write_files(context, dest, root, header)


def _named_contexts(engine, settings: buildsettings.BuildSettings, job: ImageJob) -> dict[str, str]:
    """The devel stage as the image just built, where the backend can say so: BuildKit on
    the engine's own builder (another builder would have to be handed the image first)."""
    if engine.backend != "buildkit" or settings.builder or job.devel_image is None:
        return {}
    return {"devel": f"docker-image://{job.devel_image}"}


def finish(engine, job: ImageJob, image_id: str, compression: str = "gzip") -> str:
    """A built, untagged image: read back and checked (when JOB expects anything), labelled
    with what it reported, then tagged JOB's references; the tagged image's id."""
    if job.expect is not None:
        labels = verify(engine, image_id, job.expect, log_file(job))
        image_id = add_labels(engine, image_id, labels, log_file(job), compression)
        if job.expect.conformance and runner.run(image_id, [str(runner.DERIVED_SUITE)], stdout=sys.stderr) != 0:
            raise BuildFailure(
                f"the derived image {image_id[:19]} failed its conformance tests; {', '.join(job.refs)} was not moved"
            )
    for ref in job.refs:
        engine.tag(image_id, ref)
    return image_id


def verify(engine, image_id: str, expect: Expectation, log_path: Path) -> dict[str, str]:
    """Read what the untagged image holds and refuse it when it disagrees with EXPECT;
    the labels saying what it holds."""
    extra: dict[str, str] = {}
    extension = expect.extension
    if expect.runtime:
        found = runtime_image.toolchain_found(engine, image_id)
        if found:
            raise BuildError(
                f"the runtime image holds a compiler toolchain: {', '.join(found)}",
                step="read-back check",
                log_path=log_path,
            )
        extra[Label.COVERAGE] = ""
    if expect.devel_image:
        extra[Label.COVERAGE] = engine.image_labels(expect.devel_image).get(Label.COVERAGE, "")
        library = runtime_image.extension_library(engine, expect.devel_image)
        if library and runtime_image.file_digest(engine, expect.devel_image, library) != runtime_image.file_digest(
            engine, image_id, library
        ):
            raise BuildError(
                f"the runtime image's {library} is not the devel image's", step="read-back check", log_path=log_path
            )
        extension = bool(library)
    requested = list(expect.requested)
    try:
        report = readback.read_report(
            engine, image_id, requested, coverage=expect.coverage, store=paths.readback_store()
        )
    except UserError as exc:  # an image that cannot say what it holds is a failed build, not bad input
        raise BuildError(str(exc), step="read-back check", log_path=log_path) from None
    verdict = readback.check(
        report, expect.release, expect.variant, requested, dict(expect.toggles), extension, expect.components
    )
    for warning in verdict.warnings:
        say(f"warning: {warning}")
    if verdict.problems:
        raise BuildError(
            f"the built image does not match release {expect.release.name} {expect.variant.name}: "
            f"{verdict.problems[0]}",
            step="read-back check",
            tail=verdict.problems,
            log_path=log_path,
        )
    labels = {**readback.measured_labels(report), **extra}
    if expect.base_image:  # the provenance names the base by digest (builder push --sign)
        labels[BASE_DIGEST] = image_digest(engine, expect.base_image)
    return labels


def image_digest(engine: ImageStore, ref: str) -> str:
    """A registry's digest of REF when it came from one, else this engine's id (sha256:...)."""
    info = engine.inspect(ref)
    for repo_digest in info.get("RepoDigests") or []:
        return repo_digest.split("@", 1)[1]
    return info["Id"]


def add_labels(engine, image_id: str, labels: dict[str, str], log_path: Path, compression: str = "gzip") -> str:
    """A label-only image on top of IMAGE_ID (no new layer). The label step exports the
    image again: with the build's COMPRESSION (BuildKit would otherwise turn zstd layers
    back into gzip)."""
    try:  # the values are what the image reported: written quoted, or refused
        lines = " \\\n      ".join(f"{FILTERS['label_key'](k)}={FILTERS['dq'](v)}" for k, v in labels.items())
    except QuotingError as exc:
        raise BuildError(
            f"the image reported a label value that cannot be written: {exc}", step="read-back check", log_path=log_path
        ) from None
    with tempfile.TemporaryDirectory(prefix="builder-labels-") as tmp:
        # FROM through an ARG: BuildKit backends give an image id a temporary tag to resolve
        (Path(tmp) / "Dockerfile").write_text(
            f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\nLABEL {lines}\n", encoding="utf-8"
        )
        request = BuildRequest(
            context=Path(tmp),
            buildargs={"BASE_IMAGE": FILTERS["ref"](image_id)},
            nocache=False,
            network_mode=None,
            log_path=log_path.with_suffix(".labels.log"),
            progress=ProgressMode.QUIET,
            compression=compression,
        )
        labelled = engine.build(request, Progress("labels", mode=ProgressMode.QUIET)).image_id
    forget_unlabelled(engine, image_id, labelled)
    return labelled


def forget_unlabelled(engine: ImageStore, image_id: str, labelled: str) -> None:
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
