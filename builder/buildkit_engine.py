"""The BuildKit backend behind the engine interface: DockerEngine for everything but
`build`, which runs through `docker buildx` (builder/buildx.py) on the same engine.

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
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from builder import buildx
from builder.contract import BUILDER_MOUNT
from builder.engine import (BuildRequest, BuildResult, DockerEngine, Engine, Progress, buildx_version,
                            signals_raise)
from builder.errors import BuildError, Interrupted, UserError, redact

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
        progress = progress or Progress("build", quiet=request.quiet)
        elsewhere, flag, env = self._where(request.builder)
        with self._recorded(progress, request.log_path) as on_event, base_by_tag(self, request.buildargs) as buildargs, \
                tempfile.TemporaryDirectory(prefix="tfbuilder-load-") as tmp:
            # Another builder's image comes back as an archive (its engine, or none, keeps
            # what it builds) and is loaded here, where it is checked and tagged.
            archive = Path(tmp) / "image.tar" if elsewhere else None
            req = buildx.BuildxRequest(context=request.context, buildargs=buildargs,
                                       secrets=dict(request.secrets), network=request.network_mode,
                                       no_cache=request.nocache, builder=flag,
                                       cache_ref=request.cache_ref, output_file=archive)
            result = buildx.build(req, on_event=on_event, known=None if elsewhere else self._knows, env=env)
            # buildx's own record of where it built: BUILDER/NODE/REF
            on_event(buildx.Event("note", "", f"built by {result.metadata.get('buildx.build.ref', '?')}"))
            image_id = result.image_id
            if archive:
                buildx.load(archive, self._env())
                image_id = buildx.image_of(result.metadata, self._knows)
        seconds = time.monotonic() - progress.start
        progress.done(f"built {image_id[:19]} ({result.steps} steps, {result.cached} from cache)")
        return BuildResult(image_id, result.steps, seconds, result.cached, request.log_path)

    def bake(self, definition: dict, targets: list[str], progress: Progress,
             log_path: Path | None, builder: str | None = None) -> dict[str, str]:
        """Bake TARGETS of DEFINITION on this engine (or on BUILDER, each image then loaded
        here from an archive); each target's untagged image id."""
        elsewhere, flag, env = self._where(builder)
        with self._recorded(progress, log_path) as on_event, tempfile.TemporaryDirectory(prefix="tfbuilder-load-") as tmp:
            if elsewhere:
                definition = {**definition, "target": {
                    name: {**t, "output": [f"type=docker,dest={Path(tmp) / name}.tar"]}
                    for name, t in definition["target"].items()}}
            metadata = buildx.bake(definition, targets, on_event=on_event, env=env, builder=flag)
            for name, m in sorted(metadata.items()):
                on_event(buildx.Event("note", "", f"{name} built by {m.get('buildx.build.ref', '?')}"))
            if elsewhere:
                for name in metadata:
                    buildx.load(Path(tmp) / f"{name}.tar", self._env())
            images = {name: buildx.image_of(m, self._knows) for name, m in metadata.items()}
        progress.done(f"baked {len(images)} images")
        return images

    def _where(self, builder: str | None) -> tuple[bool, str | None, dict[str, str]]:
        """(another builder than this engine's own?, buildx's --builder, buildx's environment)."""
        if builder in (None, "default"):
            return False, "default", self._env()
        return (True, *buildx.on_builder(builder, self._env()))

    def _knows(self, digest: str) -> bool:
        return self.image_id(digest) is not None

    def _env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.where}

    @contextmanager
    def _recorded(self, progress: Progress, log_path: Path | None) -> Iterator:
        """Events onto PROGRESS and into the log at LOG_PATH; failures named as the legacy
        builder named them, interrupts reported."""
        log = open(log_path, "w", encoding="utf-8") if log_path else None
        try:
            with signals_raise(), progress.heartbeat():
                yield lambda event: record(event, progress, log)
        except Interrupted:
            progress.done(f"interrupted during {progress.step or 'the build'}; BuildKit stopped the build")
            raise
        except BuildError as exc:
            if log:
                log.write(f"ERROR: {redact(exc.message)}\n")
            exc.log_path = log_path
            if exc.step:
                exc.message = exc.message.replace(exc.step, step_label(exc.step))
                exc.args = (exc.message,)
                exc.step = step_label(exc.step)
            raise
        finally:
            if log:
                log.close()


def numbered_step(name: str) -> re.Match[str] | None:
    """A vertex that is a Dockerfile step: (N, M, instruction), the builder's own mounts left out (noise here)."""
    return NUMBERED.match(BUILDER_MOUNT.sub("", name))


def step_label(name: str) -> str:
    """A vertex as the legacy builder named its steps: "step 12/18: RUN ./nvbuild.sh ..."."""
    numbered = numbered_step(name)
    return f"step {numbered.group(1)}/{numbered.group(2)}: {numbered.group(3)}" if numbered else name


def record(event: buildx.Event, progress: Progress, log: IO[str] | None) -> None:
    """One buildx event onto the progress line and into the log file."""
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
        log.write(f"#builder-done {numbered.group(1)}/{numbered.group(2)} at {at} ({event.seconds:.1f}s): "
                  f"{redact(numbered.group(3))}\n")
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
