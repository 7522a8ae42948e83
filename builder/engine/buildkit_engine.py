"""The BuildKit backend behind the engine interface: DockerEngine for everything but
`build`, which runs through `docker buildx` (builder/engine/buildx.py) on the same engine.

What a caller sees is what the legacy builder gave: an untagged image id, a progress
line per numbered step, a log file with `#builder-step` markers (bench/ reads them), a
BuildError naming the failing step. Two differences are handled here:
- BuildKit resolves `FROM <image id>` as a registry name (moby/buildkit#2204): an id
  passed as the BASE_IMAGE build arg gets a temporary tag for the build's duration.
- buildx talks to the engine the Docker CLI is pointed at: it is given this engine's
  address (DOCKER_HOST) and the engine's own `default` builder, so the image lands where
  docker-py looks for it.

`connect()` picks the backend: BuildKit when the CLI has buildx, the legacy builder when
it has not or when BUILDER_BACKEND=legacy (doctor reports which one builds)."""

from __future__ import annotations

import os
import re
import secrets
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Iterator

from builder.core.contract import BUILDER_MOUNT
from builder.core.errors import BuildError, Interrupted, UserError
from builder.core.redact import redact
from builder.core.terminal import say
from builder.engine import builders, buildx
from builder.engine.api import BakeJob, BuildRequest, BuildResult, Engine
from builder.engine.buildx import buildx_version
from builder.engine.docker_engine import DockerEngine
from builder.engine.progress import Progress
from builder.engine.signals import signals_raise

# "[ 3/25] RUN ..." or "[stage-1 3/5] COPY ...": the Dockerfile steps among BuildKit's vertexes
NUMBERED = re.compile(r"^\[(?:\S+ )?\s*(\d+)/(\d+)\] (.*)$", re.S)
IMAGE_ID = re.compile(r"^(sha256:)?[0-9a-f]{64}$")
BACKENDS = ("buildkit", "legacy")


def backend_wanted() -> str:
    value = os.environ.get("BUILDER_BACKEND", "buildkit")
    if value not in BACKENDS:
        raise UserError(f"BUILDER_BACKEND={value[:20]!r}: use one of {', '.join(BACKENDS)}")
    return value


def connect(base_url: str | None = None, timeout: int = 600) -> DockerEngine:
    """The engine with the best build backend this machine has."""
    if backend_wanted() == "buildkit" and buildx_version():
        return BuildKitEngine(base_url, timeout)
    return DockerEngine(base_url, timeout)


class BuildKitEngine(DockerEngine):
    backend = "buildkit"

    def build(self, request: BuildRequest, progress: Progress | None = None) -> BuildResult:
        progress = progress or Progress("build", mode=request.progress)
        at = self._where(request.builder)
        with (
            self._recorded(progress, request.log_path) as on_event,
            base_by_tag(self, request.buildargs) as buildargs,
            tempfile.TemporaryDirectory(prefix="tfbuilder-load-") as tmp,
        ):
            builders.ensure_inputs(at, [v for k, v in buildargs.items() if k in builders.FROM_ARGS], self._env(), say)
            # Another builder's image comes back as an archive (its engine, or none, keeps
            # what it builds) and is loaded here, where it is checked and tagged.
            archive = None if at.here else Path(tmp) / "image.tar"
            req = buildx.BuildxRequest(
                context=request.context,
                buildargs=buildargs,
                secrets=dict(request.secrets),
                network=request.network_mode,
                no_cache=request.nocache,
                builder=at.flag,
                cache_ref=request.cache_ref,
                output_file=archive,
                compression=request.compression,
                target=request.target,
                contexts=dict(request.contexts),
            )
            result = buildx.build(req, on_event=on_event, known=self._knows if at.here else None, env=at.env)
            # buildx's own record of where it built: BUILDER/NODE/REF
            on_event(buildx.Event("note", "", f"built by {result.metadata.get('buildx.build.ref', '?')}"))
            image_id = result.image_id
            if archive:
                buildx.load(archive, self._env())
                image_id = buildx.image_of(result.metadata, self._knows)
        seconds = time.monotonic() - progress.start
        progress.done(f"built {image_id[:19]} ({result.steps} steps, {result.cached} from cache)")
        return BuildResult(image_id, result.steps, seconds, result.cached, request.log_path)

    def bake(self, jobs: list[BakeJob], progress: Progress) -> list[dict[str, str] | BuildError]:
        """Run JOBS at once, each on its builder (another builder's images come back as
        archives and are loaded here); per job, each target's untagged image id, or the
        BuildError it failed with (the others go on)."""
        places = [self._where(job.builder) for job in jobs]
        for job, at in zip(jobs, places):  # before anything builds: a refusal wastes nothing
            builders.ensure_inputs(at, builders.from_images(job.definition, job.targets), self._env(), say)
        shown = (
            [progress]
            if len(jobs) == 1
            else [Progress(f"{progress.label}@{at.name}", progress.stream, progress.mode) for at in places]
        )
        with tempfile.TemporaryDirectory(prefix="tfbuilder-load-") as tmp, ExitStack() as stack:
            archives = [Path(tmp) / str(i) for i in range(len(jobs))]
            for archive in archives:
                archive.mkdir()
            recorders = [stack.enter_context(self._recorded(prog, job.log_path)) for job, prog in zip(jobs, shown)]
            outcomes = buildx.bake_all(
                [
                    buildx.Bake(
                        job.definition if at.here else to_archives(job.definition, archive),
                        job.targets,
                        recorder,
                        at.env,
                        at.flag,
                    )
                    for job, at, archive, recorder in zip(jobs, places, archives, recorders)
                ]
            )
            return [
                self._baked(outcome, at, archive, recorder)
                for outcome, at, archive, recorder in zip(outcomes, places, archives, recorders)
            ]

    def _baked(
        self, outcome: dict[str, dict] | BuildError, at: builders.Where, archives: Path, recorder: Recorder
    ) -> dict[str, str] | BuildError:
        """One bake's images, loaded here when another builder built them; or its failure, named."""
        try:
            if isinstance(outcome, BuildError):
                raise outcome
            for name, m in sorted(outcome.items()):  # buildx's own record of where it built
                recorder(buildx.Event("note", "", f"{name} built by {m.get('buildx.build.ref', '?')}"))
                if not at.here:
                    buildx.load(archives / f"{name}.tar", self._env())
            images = {name: buildx.image_of(m, self._knows) for name, m in outcome.items()}
        except BuildError as exc:
            return recorder.failed(exc)
        recorder.progress.done(f"baked {len(images)} images")
        return images

    def _where(self, builder: str | None) -> builders.Where:
        return builders.where(builder, self._env())

    def _knows(self, digest: str) -> bool:
        return self.image_id(digest) is not None

    def _env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.where}

    @contextmanager
    def _recorded(self, progress: Progress, log_path: Path | None) -> Iterator[Recorder]:
        """Events onto PROGRESS and into the log at LOG_PATH; a failure named as the legacy
        builder named it, interrupts reported."""
        recorder = Recorder(progress, log_path)
        try:
            with signals_raise(), progress.heartbeat():
                yield recorder
        except Interrupted:
            progress.done(f"interrupted during {progress.step or 'the build'}; BuildKit stopped the build")
            raise
        except BuildError as exc:
            raise recorder.failed(exc) from None  # the failure, named: its own cause
        finally:
            recorder.close()


class Recorder:
    """A build's events onto its progress line and into its log file."""

    def __init__(self, progress: Progress, log_path: Path | None) -> None:
        self.progress, self.log_path = progress, log_path
        self.log = open(log_path, "w", encoding="utf-8") if log_path else None

    def __call__(self, event: buildx.Event) -> None:
        record(event, self.progress, self.log)

    def failed(self, exc: BuildError) -> BuildError:
        """EXC with its log named and its step named as the legacy builder named steps."""
        if exc.log_path is None:  # not named yet
            if self.log:
                self.log.write(f"ERROR: {redact(exc.message)}\n")
                self.log.flush()
            exc.log_path = self.log_path
            if exc.step:
                exc.message = exc.message.replace(exc.step, step_label(exc.step))
                exc.args = (exc.message,)
                exc.step = step_label(exc.step)
        return exc

    def close(self) -> None:
        if self.log:
            self.log.close()


def to_archives(definition: dict, directory: Path) -> dict:
    """DEFINITION with each target's image written to DIRECTORY/TARGET.tar (for `docker load`)."""
    return {
        **definition,
        "target": {
            name: {**t, "output": [f"{t['output'][0]},dest={directory / name}.tar"]}
            for name, t in definition["target"].items()
        },
    }


def numbered_step(name: str) -> re.Match[str] | None:
    """A vertex that is a Dockerfile step: (N, M, instruction), the builder's own mounts left out (noise here)."""
    return NUMBERED.match(BUILDER_MOUNT.sub("", name))


def step_label(name: str) -> str:
    """A vertex as the legacy builder named its steps: "step 12/18: RUN ./nvbuild.sh ..."."""
    numbered = numbered_step(name)
    return f"step {numbered.group(1)}/{numbered.group(2)}: {numbered.group(3)}" if numbered else name


def record(event: buildx.Event, progress: Progress, log: IO[str] | None) -> None:
    """One buildx event onto the progress line and into the log file."""
    if event.kind == "raw":  # --progress rawjson: buildx's own object; the log keeps the events below
        progress.on_raw(event.raw or {})
        return
    if event.kind == "log":
        progress.on_log(event.text)
    numbered = numbered_step(event.step)
    if event.kind == "step" and numbered:
        progress.on_step(int(numbered.group(1)), int(numbered.group(2)), numbered.group(3))
    if not log:
        return
    at = f"{progress.clock() - progress.start:.1f}s"
    if event.kind == "step":  # when each step started: the bench and post-mortems read it
        if numbered:
            log.write(f"#builder-step {numbered.group(1)}/{numbered.group(2)} at {at}: {redact(numbered.group(3))}\n")
        else:
            log.write(f"#builder-vertex at {at}: {redact(event.step)}\n")
    elif event.kind == "done" and numbered:  # how long each step ran, by BuildKit's own clock
        log.write(
            f"#builder-done {numbered.group(1)}/{numbered.group(2)} at {at} ({event.seconds:.1f}s): "
            f"{redact(numbered.group(3))}\n"
        )
    elif event.kind == "cached" and numbered:  # nothing ran: the layer came from a cache (a registry's too)
        log.write(f"#builder-cached {numbered.group(1)}/{numbered.group(2)}: {redact(numbered.group(3))}\n")
    elif event.kind == "done":
        log.write(f"#builder-done at {at} ({event.seconds:.1f}s): {redact(event.step)}\n")
    elif event.kind == "log":
        log.write(redact(event.text))  # the log writer: credentials never reach the file
    elif event.kind == "error":
        log.write(f"ERROR in {redact(event.step)}: {redact(event.text)}\n")
    elif event.kind == "note":
        log.write(f"#builder-note {redact(event.text)}\n")
    log.flush()


@contextmanager
def base_by_tag(engine: Engine, buildargs: dict[str, str]) -> Iterator[dict[str, str]]:
    """BASE_IMAGE given as an image id: a temporary tag for BuildKit to resolve, removed after."""
    base = buildargs.get("BASE_IMAGE", "")
    if not IMAGE_ID.match(base):
        yield dict(buildargs)
        return
    temp = f"tfbuilder-tmp/base:{secrets.token_hex(8)}"
    engine.tag(base, temp)
    try:
        yield {**buildargs, "BASE_IMAGE": temp}
    finally:
        try:
            engine.remove_image(temp)  # only the tag: the image is the caller's
        except Exception:
            pass
