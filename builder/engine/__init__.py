"""The container engine behind a small interface (repo2docker's idea), so a BuildKit
backend can be added without touching callers. This package is the engine's interface:
its names are re-exported here, so callers write `from builder.engine import X`.

    api.py               the Engine protocol by role, the request and result records
    progress.py          the --progress mode and the terminal's progress lines
    docker_engine.py     the docker-py backend (the one module that imports docker-py), and
                         what the Docker client config holds for a registry
    dockerfile_mounts.py the legacy builder's Dockerfile, without the builder's mounts
    signals.py           SIGINT/SIGTERM as Interrupted during long operations
    buildx.py, buildkit_engine.py, builders.py, ...: the BuildKit backend
"""

from __future__ import annotations

from builder.core.contract import split_ref
from builder.core.errors import BuildError, Interrupted
from builder.engine.api import (
    COMPRESSIONS,
    BakeJob,
    BuildRequest,
    BuildResult,
    Builds,
    CannotStart,
    Engine,
    EngineError,
    EngineVersion,
    ImageStore,
    ImageSummary,
    Pushes,
    Runs,
    Unreachable,
)
from builder.engine.buildx import buildx_version
from builder.engine.docker_engine import DockerEngine, client_auth
from builder.engine.dockerfile_mounts import legacy_dockerfile, without_builder_mounts
from builder.engine.progress import HEARTBEAT_SECONDS, PROGRESS_MODES, Progress, ProgressMode, progress_mode
from builder.engine.signals import signals_raise

__all__ = [
    "COMPRESSIONS",
    "HEARTBEAT_SECONDS",
    "PROGRESS_MODES",
    "BakeJob",
    "BuildError",
    "BuildRequest",
    "BuildResult",
    "Builds",
    "CannotStart",
    "DockerEngine",
    "Engine",
    "EngineError",
    "EngineVersion",
    "ImageStore",
    "ImageSummary",
    "Interrupted",
    "Progress",
    "ProgressMode",
    "Pushes",
    "Runs",
    "buildx_version",
    "client_auth",
    "legacy_dockerfile",
    "progress_mode",
    "signals_raise",
    "split_ref",
    "without_builder_mounts",
    "Unreachable",
]
