"""The container engine behind a small interface (repo2docker's idea), so a BuildKit
backend can be added without touching callers.

DockerEngine drives docker-py's low-level APIClient: the build stream is read as it
arrives, any `error` in it raises (docker-py itself does not), the last lines are
kept for the failure message and the full log goes to a file. Images are built
untagged and tagged only after success, so a failed or interrupted build never
moves an existing tag.
"""
from __future__ import annotations

import collections
import json
import os
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from builder.core import grammar, interrupts
from builder.core.contract import BUILDER_MOUNT, split_ref  # the one reference grammar (image contract)
from builder.core.errors import BuildError, Interrupted, UserError, redact

STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
RUNNING_IN = re.compile(r"^ ---> Running in ([0-9a-f]{12,64})")
STEP_IMAGE = re.compile(r"^ ---> ([0-9a-f]{12,64})$")
TAIL_LINES = 30


@contextmanager
def signals_raise() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into Interrupted while a long operation runs (the CLI's
    handler, interrupts.py, already does; this covers library use)."""
    installed = signal.getsignal(signal.SIGINT) is interrupts.handler
    restore = (lambda: None) if installed else interrupts.install()
    try:
        yield
    finally:
        restore()


COMPRESSIONS = ("gzip", "zstd")  # of an image's layers (BuildRequest.compression); zstd: BuildKit only


@dataclass
class BuildResult:
    image_id: str
    steps: int
    seconds: float
    cached_steps: int = 0
    log_path: Path | None = None


@dataclass
class BuildRequest:
    context: Path
    buildargs: dict[str, str] = field(default_factory=dict)
    nocache: bool = False
    network_mode: str | None = None
    log_path: Path | None = None
    quiet: bool | str = False  # a --progress mode (True: quiet)
    secrets: dict[str, Path] = field(default_factory=dict)  # BuildKit secret id -> file (never a build arg)
    cache_ref: str | None = None  # a registry layer cache to read and write (BuildKit only)
    builder: str | None = None    # a buildx builder other than the engine's own (BuildKit only)
    compression: str = "gzip"     # of the image's layers: zstd is BuildKit only
    target: str | None = None     # the Dockerfile stage to build (a layered release: devel, runtime)
    # named build contexts (BuildKit only): a stage NAME taken from an image instead of built
    contexts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BakeJob:
    """TARGETS of a bake DEFINITION (and the targets they need) on BUILDER (None: the
    engine's own); the jobs of one bake() run at once, each with its own log."""
    definition: dict
    targets: list[str]
    log_path: Path | None = None
    builder: str | None = None


class EngineError(Exception):
    """The engine refused a request (its own message, e.g. a registry's answer to a login);
    callers see this instead of the client library's exception types."""


class CannotStart(UserError):
    """The engine would not start a command in an image (most often: the image has no such
    program, e.g. a labelled FROM scratch image without python3 or bash)."""

    def __init__(self, image: str, program: str, why: str):
        super().__init__(f"{image}: the engine cannot run {program} in it ({why})")
        self.image, self.program, self.why = image, program, why


@dataclass
class EngineVersion:
    server: str | None      # the engine's release, e.g. Docker 24.0.7
    api: str | None         # the API version the engine speaks
    client_api: str | None  # the API version this client negotiated


@dataclass
class ImageSummary:
    id: str
    tags: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)


class ImageStore(Protocol):
    """The engine's images: what the read-back, tags, bases and reports need."""

    where: str    # how the engine is reached, for messages

    def tag(self, image_id: str, ref: str) -> None: ...
    def remove_image(self, ref: str) -> None: ...
    def inspect(self, ref: str) -> dict[str, Any]: ...
    def image_id(self, ref: str) -> str | None: ...
    def image_labels(self, ref: str) -> dict[str, str]: ...
    def images(self, repository: str | None = None, label: str | None = None) -> list[ImageSummary]: ...
    def pull(self, ref: str) -> bool: ...
    def import_rootfs(self, tar_path: Path, ref: str) -> str: ...


class Runs(Protocol):
    """Throwaway containers: an image's own report, patch checks, probes."""

    def run_capture(self, image: str, command: list[str], binds: dict[str, str] | None = None,
                    timeout: int = 600, stdout_only: bool = False) -> tuple[int, str]: ...
    def remove_container(self, container: str) -> None: ...


class Builds(Protocol):
    """Builds: one at a time (build) or a bake's jobs at once."""

    backend: str  # how build() builds: "buildkit" (secrets, cache mounts) or "legacy"

    def build(self, request: BuildRequest, progress: Progress | None = None) -> BuildResult: ...
    def bake(self, jobs: list[BakeJob], progress: Progress) -> list[dict[str, str] | BuildError]: ...


class Pushes(Protocol):
    """Publishing to a registry."""

    def login(self, username: str, password: str, registry: str) -> None: ...
    def push(self, ref: str, auth: dict[str, str]) -> Iterator[dict[str, Any]]: ...


class Engine(ImageStore, Runs, Builds, Pushes, Protocol):
    """Everything the builder asks of a container engine, by role: a caller names the role
    it needs (a report needs ImageStore and Runs, never Builds). DockerEngine is the
    docker-py one; tests/unit/fake_engine.py the in-memory one (a unit test keeps their
    method names and signatures equal to these)."""

    def ping(self) -> dict[str, Any]: ...
    def version(self) -> EngineVersion: ...


HEARTBEAT_SECONDS = 30.0


# `--progress` (Docker's names): auto = one updating line on a terminal, step lines
# otherwise; plain = step lines and every build log line; quiet = nothing but the result;
# rawjson = the engine's own progress messages, one JSON object per line.
PROGRESS_MODES = ("auto", "plain", "quiet", "rawjson")


def progress_mode(value: bool | str) -> str:
    """A --progress mode; a bool is the older quiet flag (True: quiet, False: auto)."""
    if isinstance(value, bool):
        return "quiet" if value else "auto"
    if value not in PROGRESS_MODES:
        raise UserError(f"--progress {str(value)[:20]!r}: use one of {', '.join(PROGRESS_MODES)}")
    return value


class Progress:
    """One updating status line on a terminal; plain step lines otherwise, and in that
    case a heartbeat line whenever nothing was printed for HEARTBEAT_SECONDS (a silent
    step, such as the base's apt-get, must not look like a hung build in a CI log).
    QUIET is a --progress mode (or the older bool): plain adds the build's log lines
    (on_log), rawjson prints only the engine's messages (on_raw), quiet nothing."""

    def __init__(self, label: str, stream=sys.stderr, quiet: bool | str = False,
                 clock: Callable[[], float] = time.monotonic, heartbeat_seconds: float = HEARTBEAT_SECONDS):
        self.label, self.stream, self.mode = label, stream, progress_mode(quiet)
        self.quiet = self.mode in ("quiet", "rawjson")  # no lines of our own
        self.tty = stream.isatty() and self.mode == "auto"
        self.clock, self.heartbeat_seconds = clock, heartbeat_seconds
        self.start = clock()
        self.last_line = self.start
        self.step = ""
        self._lock = threading.Lock()  # the heartbeat thread writes too

    def on_log(self, text: str) -> None:
        """A piece of the build's own output: printed, redacted, with --progress plain."""
        if self.mode != "plain" or not text:
            return
        with self._lock:
            self.stream.write(redact(text) if text.endswith("\n") else redact(text) + "\n")
            self.stream.flush()
            self.last_line = self.clock()

    def on_raw(self, message: dict) -> None:
        """One of the engine's progress messages: a JSON line, redacted, with --progress rawjson."""
        if self.mode != "rawjson":
            return
        with self._lock:
            self.stream.write(redact(json.dumps(message, separators=(",", ":"))) + "\n")
            self.stream.flush()

    def elapsed(self) -> str:
        s = int(self.clock() - self.start)
        return f"{s // 60:02d}:{s % 60:02d}"

    def on_step(self, n: int, total: int, instruction: str) -> None:
        self.step = f"step {n}/{total}: {instruction}"
        if self.quiet:
            return
        with self._lock:
            if self.tty:
                line = f"[{self.label} {self.elapsed()}] {self.step}"
                self.stream.write("\r\033[K" + line[:150])  # one terminal line
            else:
                self.stream.write(f"{self.label} +{self.elapsed()} {self.step}\n")
            self.stream.flush()
            self.last_line = self.clock()

    def tick(self) -> bool:
        """Print a heartbeat line when nothing was printed for heartbeat_seconds (non-TTY)."""
        if self.quiet or self.tty:
            return False
        with self._lock:
            if self.clock() - self.last_line < self.heartbeat_seconds:
                return False
            self.stream.write(f"{self.label} +{self.elapsed()} {self.step or 'starting'} (still running)\n")
            self.stream.flush()
            self.last_line = self.clock()
        return True

    @contextmanager
    def heartbeat(self, poll: float = 1.0) -> Iterator[None]:
        """Call tick() from a background thread while the block runs."""
        if self.quiet or self.tty:
            yield
            return
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(poll):
                self.tick()

        thread = threading.Thread(target=beat, name=f"heartbeat-{self.label}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def done(self, message: str) -> None:
        if self.tty and not self.quiet:
            self.stream.write("\r\033[K")
        if not self.quiet:
            with self._lock:
                self.stream.write(f"{self.label} +{self.elapsed()} {message}\n")
                self.stream.flush()


class DockerEngine:
    """The Docker engine through docker-py's APIClient (the legacy builder)."""

    backend = "legacy"  # how build() builds (BuildKitEngine: "buildkit")

    def __init__(self, base_url: str | None = None, timeout: int = 600):
        import docker
        from docker.utils import kwargs_from_env

        kwargs = kwargs_from_env()
        if base_url:
            kwargs["base_url"] = base_url
        self.where = kwargs.get("base_url", "unix:///var/run/docker.sock")
        try:
            self.api = docker.APIClient(timeout=timeout, **kwargs)
            self.api.ping()
        except Exception as exc:  # docker raises several unrelated types here
            raise UserError(f"cannot reach the Docker engine at {self.where} ({type(exc).__name__}); "
                            "start it with `bash scripts/setup.sh`") from None

    def ping(self) -> dict[str, Any]:
        return self.api.info()

    def version(self) -> EngineVersion:
        version = self.api.version()
        return EngineVersion(version.get("Version"), version.get("ApiVersion"), self.api.api_version)

    def bake(self, jobs: list[BakeJob], progress: Progress) -> list[dict[str, str] | BuildError]:
        """Only BuildKit bakes (callers check `backend` first and build one by one)."""
        raise UserError("the legacy builder has no bake: build the variants one by one")

    def build(self, request: BuildRequest, progress: Progress | None = None) -> BuildResult:
        for wanted, option in ((request.cache_ref, "--layer-cache"), (request.builder, "--builder"),
                               (request.compression != "gzip", "--compression zstd")):
            if wanted:
                raise UserError(f"{option} needs the BuildKit backend (docker buildx); this engine builds with "
                                "the legacy builder (`builder doctor` says why)")
        progress = progress or Progress("build", quiet=request.quiet)
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        containers: list[str] = []
        created: list[str] = []  # step images of a --no-cache build (none of them shared)
        image_id = ""
        steps = cached = 0
        current = ""
        log = open(request.log_path, "w", encoding="utf-8") if request.log_path else None
        stream = None
        try:
            with signals_raise(), progress.heartbeat():
                with legacy_dockerfile(request.context) as dockerfile:  # docker-py reads it in build()
                    stream = self.api.build(
                        path=str(request.context), dockerfile=dockerfile, rm=True, forcerm=True,
                        nocache=request.nocache, pull=False, buildargs=request.buildargs,
                        network_mode=request.network_mode, target=request.target, decode=True)
                for chunk in stream:
                    progress.on_raw(chunk)
                    if "error" in chunk or "errorDetail" in chunk:
                        detail = chunk.get("errorDetail") or {}
                        message = (chunk.get("error") or detail.get("message") or "unknown error").strip()
                        if log:
                            log.write(f"ERROR: {redact(message)}\n")
                        raise BuildError(message, current, list(tail), request.log_path)
                    if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                        image_id = chunk["aux"]["ID"]
                    text = chunk.get("stream")
                    if not text:
                        continue
                    if log:
                        log.write(redact(text))  # the log writer: credentials never reach the file
                        log.flush()
                    progress.on_log(text)
                    for line in text.splitlines():
                        m = STEP.match(line)
                        if m:
                            if log:  # when each step started: the bench and post-mortems read it
                                # (on a line of its own: the engine sends a step's newline apart)
                                log.write(("" if text.endswith("\n") else "\n")
                                          + f"#builder-step {m.group(1)}/{m.group(2)} at "
                                          f"{time.monotonic() - progress.start:.1f}s\n")
                            steps = int(m.group(1))
                            current = f"step {m.group(1)}/{m.group(2)}: {m.group(3)}"
                            progress.on_step(int(m.group(1)), int(m.group(2)), m.group(3))
                            tail.clear()
                            continue
                        m = STEP_IMAGE.match(line)
                        if m and request.nocache and not current.split(": ", 1)[-1].upper().startswith("FROM"):
                            created.append(m.group(1))
                            continue
                        m = RUNNING_IN.match(line)
                        if m:
                            containers.append(m.group(1))
                        elif line.strip() == "---> Using cache":
                            cached += 1
                        elif line.strip():
                            tail.append(line.rstrip())
                        done = re.match(r"^Successfully built ([0-9a-f]+)", line)
                        if done and not image_id:
                            image_id = done.group(1)
        except Interrupted:
            self._abort(stream, containers, created)
            progress.done(f"interrupted during {current or 'the build'}; build containers removed")
            raise
        except BuildError:
            self._abort(stream, containers, created)
            raise
        except Exception as exc:
            self._abort(stream, containers, created)
            if exc.__class__.__module__.startswith(("docker", "requests", "urllib3")):
                raise BuildError(f"the engine failed: {exc}", current, list(tail), request.log_path) from None
            raise
        finally:
            if log:
                log.close()
        if not image_id:
            raise BuildError("the engine reported no image", current, list(tail), request.log_path)
        seconds = time.monotonic() - progress.start
        progress.done(f"built {image_id[:19]} ({steps} steps, {cached} from cache)")
        return BuildResult(image_id, steps, seconds, cached, request.log_path)

    def _abort(self, stream: Any, containers: list[str], created: list[str] | None = None) -> None:
        """Stop reading (the engine cancels a build whose client went away), remove the
        containers the build started, which the engine may leave behind, and the step
        images a --no-cache build made: the legacy builder takes the newest matching
        image as a cache hit, so a half chain left behind would make every later build
        branch off it and rebuild from there."""
        try:
            if stream is not None:
                stream.close()
        except Exception:
            pass
        deadline = time.monotonic() + 10
        pending = list(containers)
        while pending and time.monotonic() < deadline:
            for cid in list(pending):
                try:
                    self.remove_container(cid)  # one already gone counts as removed
                    pending.remove(cid)
                except Exception:
                    pass
            if pending:
                time.sleep(0.5)
        for image in reversed(created or []):  # newest first: each is the parent of the next
            try:
                self.remove_image(image)
            except Exception:
                pass

    def run_capture(self, image: str, command: list[str], binds: dict[str, str] | None = None,
                    timeout: int = 600, stdout_only: bool = False) -> tuple[int, str]:
        """Run a throwaway container (entrypoint bypassed); return exit code and output
        (stdout and stderr merged, or stdout alone)."""
        import docker

        host_config = self.api.create_host_config(
            binds={src: {"bind": dst, "mode": "ro"} for src, dst in (binds or {}).items()})
        try:
            container = self.api.create_container(image, command=command[1:], entrypoint=command[:1],
                                                  host_config=host_config)
        except docker.errors.APIError as exc:
            raise CannotStart(image, command[0], _cause(exc)) from None
        cid = container["Id"]
        try:
            with signals_raise():
                try:
                    self.api.start(cid)
                except docker.errors.APIError as exc:  # no such program in the image, ...
                    raise CannotStart(image, command[0], _cause(exc)) from None
                code = self.api.wait(cid, timeout=timeout)["StatusCode"]
            output = self.api.logs(cid, stdout=True, stderr=not stdout_only).decode(errors="replace")
        finally:
            try:
                self.remove_container(cid)
            except Exception:
                pass
        return code, output

    def remove_container(self, container: str) -> None:
        """Remove a container, running or not; one that does not exist (any more) is no error."""
        import docker

        try:
            self.api.remove_container(container, force=True)
        except docker.errors.APIError as exc:
            if "No such container" in str(exc) or getattr(getattr(exc, "response", None), "status_code", 0) == 404:
                return
            raise EngineError(str(exc.explanation or exc)) from None

    def tag(self, image_id: str, ref: str) -> None:
        repo, tag = split_ref(ref)
        if not self.api.tag(image_id, repo, tag, force=True):
            raise BuildError(f"the engine refused to tag {image_id} as {ref}")

    def remove_image(self, ref: str) -> None:
        """Remove a tag (or an untagged image). Never forced, and its parents are kept:
        an image another build already uses as its parent stays."""
        import docker

        try:
            self.api.remove_image(ref, force=False, noprune=True)
        except docker.errors.APIError as exc:
            raise EngineError(str(exc.explanation or exc)) from None

    def image_id(self, ref: str) -> str | None:
        import docker

        grammar.check_ref(ref, "image", image_id=True)  # docker-py takes '' for no image at all
        try:
            return self.api.inspect_image(ref)["Id"]
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as exc:
            if getattr(exc, "status_code", None) in (400, 404):
                return None
            raise

    def inspect(self, ref: str) -> dict[str, Any]:
        import docker

        grammar.check_ref(ref, "image", image_id=True)  # docker-py takes '' for no image at all
        try:
            return self.api.inspect_image(ref)
        except docker.errors.NotFound:
            raise UserError(f"no image '{ref}' in the engine") from None
        except docker.errors.APIError as exc:
            raise UserError(f"cannot inspect '{ref}': {exc.explanation or exc}") from None

    def image_labels(self, ref: str) -> dict[str, str]:
        return dict(self.inspect(ref).get("Config", {}).get("Labels") or {})

    def images(self, repository: str | None = None, label: str | None = None) -> list[ImageSummary]:
        """Images of REPOSITORY (all tags) and/or carrying LABEL ("key" or "key=value")."""
        found = self.api.images(name=repository, filters={"label": label} if label else None)
        return [ImageSummary(i["Id"], [t for t in i.get("RepoTags") or [] if t != "<none>:<none>"],
                             dict(i.get("Labels") or {})) for i in found]

    def login(self, username: str, password: str, registry: str) -> None:
        """Check credentials with the registry (reauth: a cached login proves nothing)."""
        import docker

        try:
            self.api.login(username, password=password, registry=registry, reauth=True)
        except docker.errors.APIError as exc:
            raise EngineError(str(exc.explanation or exc)) from None

    def push(self, ref: str, auth: dict[str, str]) -> Iterator[dict[str, Any]]:
        """Push REF; yields the engine's progress messages (status, id, progressDetail, aux,
        error) as they arrive. Failures arrive as `error` messages, not exceptions. AUTH is
        always a dict: docker-py treats None as "use the Docker config's credentials",
        which must not travel where the caller decided none may."""
        repo, tag = split_ref(ref)
        return self.api.push(repo, tag=tag, stream=True, decode=True, auth_config=dict(auth))

    def pull(self, ref: str) -> bool:
        """Try to pull; False (not an exception) when the registry cannot be reached."""
        repo, tag = split_ref(ref)
        try:
            for chunk in self.api.pull(repo, tag=tag, stream=True, decode=True):
                if "error" in chunk:
                    return False
        except Exception:
            return False
        return self.image_id(ref) is not None

    def import_rootfs(self, tar_path: Path, ref: str) -> str:
        repo, tag = split_ref(ref)
        with open(tar_path, "rb") as f:
            out = self.api.import_image_from_data(f, repository=repo, tag=tag)
        if isinstance(out, (bytes, str)) and "error" in str(out).lower():
            raise BuildError(f"docker import failed: {out}")
        image = self.image_id(ref)
        if not image:
            raise BuildError(f"docker import produced no image {ref}: {out}")
        return image


def without_builder_mounts(text: str) -> str:
    """A Dockerfile with the builder's own mounts (settings, compile cache) taken out of its RUN lines."""
    return "\n".join(BUILDER_MOUNT.sub("", line) if line.startswith("RUN ") else line
                     for line in text.split("\n"))


@contextmanager
def legacy_dockerfile(context: Path) -> Iterator[str]:
    """The Dockerfile for the legacy builder, which cannot parse mounts (it gets the
    settings over loopback instead, and no local compile cache): a copy without them, outside the
    context (docker-py sends it along), removed afterwards; the context's own file when
    it has none."""
    import tempfile

    path = context / "Dockerfile"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    stripped = without_builder_mounts(text)
    if stripped == text:
        yield "Dockerfile"
        return
    fd, name = tempfile.mkstemp(prefix="tfbuilder-legacy-", suffix=".Dockerfile")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(stripped)
        yield name
    finally:
        os.unlink(name)


def config_credentials(host: str) -> tuple[str, str, str] | None:
    """(user, password, identity token) the user's Docker client config holds for registry
    HOST, resolved as docker-py resolves it: the host's credential helper (`credHelpers`)
    or, without one, `credsStore`; else `auths`; a helper's user `<token>` and an
    `identitytoken` entry are identity tokens. None when it holds none or cannot be read.
    Client-side: no engine."""
    try:
        from docker import auth

        found = auth.resolve_authconfig(auth.load_config(), host)
    except Exception:
        return None
    if not isinstance(found, dict):
        return None
    token = found.get("IdentityToken") or found.get("identitytoken")
    if isinstance(token, str) and token:
        return found.get("Username") or found.get("username") or "<token>", "", token
    for user_key, password_key in (("Username", "Password"), ("username", "password")):
        if found.get(user_key) and found.get(password_key):
            return found[user_key], found[password_key], ""
    return None


def buildx_version() -> str:
    """`docker buildx version` of the Docker CLI on PATH ("" when it has none): BuildKit is
    a client plugin, so this asks the CLI, not the engine."""
    import subprocess

    try:
        out = subprocess.run(["docker", "buildx", "version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _cause(exc: Exception) -> str:
    """The engine's answer on one line; its error chain ends with the cause."""
    text = " ".join(str(getattr(exc, "explanation", None) or exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else "..." + text[-160:]
