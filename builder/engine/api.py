"""The engine's interface (repo2docker's idea): what the builder asks of a container
engine, by role, and the records that cross it. A BuildKit backend, the docker-py one and
the unit tests' in-memory one all answer to it, so callers never name a client library."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol

from builder.core.errors import BuildError, UserError
from builder.engine.progress import Progress, ProgressMode

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
    progress: ProgressMode = ProgressMode.AUTO  # what the terminal shows while it builds
    secrets: dict[str, Path] = field(default_factory=dict)  # BuildKit secret id -> file (never a build arg)
    cache_ref: str | None = None  # a registry layer cache to read and write (BuildKit only)
    builder: str | None = None  # a buildx builder other than the engine's own (BuildKit only)
    compression: str = "gzip"  # of the image's layers: zstd is BuildKit only
    target: str | None = None  # the Dockerfile stage to build (a layered release: devel, runtime)
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


class Unreachable(UserError):
    """No engine answers where the client looks (DOCKER_HOST, the default socket)."""

    def __init__(self, where: str, why: str):
        super().__init__(f"cannot reach the Docker engine at {where} ({why}); start it with `bash scripts/setup.sh`")
        self.where = where


class CannotStart(UserError):
    """The engine would not start a command in an image (most often: the image has no such
    program, e.g. a labelled FROM scratch image without python3 or bash)."""

    def __init__(self, image: str, program: str, why: str):
        super().__init__(f"{image}: the engine cannot run {program} in it ({why})")
        self.image, self.program, self.why = image, program, why


@dataclass
class EngineVersion:
    server: str | None  # the engine's release, e.g. Docker 24.0.7
    api: str | None  # the API version the engine speaks
    client_api: str | None  # the API version this client negotiated


@dataclass
class ImageSummary:
    id: str
    tags: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)


class ImageStore(Protocol):
    """The engine's images: what the read-back, tags, bases and reports need."""

    where: str  # how the engine is reached, for messages

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

    def run_capture(
        self,
        image: str,
        command: list[str],
        binds: dict[str, str] | None = None,
        timeout: int = 600,
        stdout_only: bool = False,
    ) -> tuple[int, str]: ...
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
