"""Run the conformance suite (pytest in a child process) against an image. The builder
names the suite's container, so an interrupt (SIGINT/SIGTERM) stops pytest and removes
the container even when pytest cannot tear down itself. pytest's temporary directories
(and whatever its tests put in TMPDIR) live in one directory of the builder's, removed
on every exit: pytest keeps its own (pytest-of-USER) for later runs to look at."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from builder import components
from builder.core.errors import Interrupted, UserError
from builder.engine import DockerEngine, Engine, EngineError

SUITE = Path(__file__).resolve().parent
DERIVED_SUITE = SUITE / "derived"  # a derived image's own checks, run after its parent's suite


def check_select(expr: str) -> None:
    """A -k expression pytest would refuse (its exit 4) is bad input: refused before running."""
    from _pytest.mark import expression

    # pytest 8 raises its ParseError, pytest 9 a SyntaxError (column in .offset).
    errors = tuple(e for e in (getattr(expression, "ParseError", None), SyntaxError) if e)
    try:
        expression.Expression.compile(expr)
    except errors as exc:
        why = getattr(exc, "message", None) or getattr(exc, "msg", None) or str(exc)
        column = getattr(exc, "column", None) or getattr(exc, "offset", None)
        where = f" at column {column}" if column else ""
        raise UserError(f"-k {expr!r} is not a pytest expression{where}: {why}".replace("\n", " ")) from None


def workers() -> int:
    """pytest-xdist workers for the suite: its tests wait on `docker exec` and TensorFlow's
    start-up as much as they compute, so two run side by side even on 2 cores (78 s against
    52 s on the release image, docs/PERFORMANCE.md); each has its own container."""
    if importlib.util.find_spec("xdist") is None:
        return 1
    return max(1, min(os.cpu_count() or 1, 4))


def container_names(container: str, n: int) -> list[str]:
    """The suite's containers: CONTAINER, or one per xdist worker (the plugin's naming)."""
    return [container] if n <= 1 else [f"{container}-gw{i}" for i in range(n)]


def command(image: str, extra: list[str], select: str | None, container: str, n: int = 1) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(SUITE / "pytest.ini"),
        "--rootdir",
        str(SUITE),
        "-p",
        "builder.image.conformance.plugin",
        "--image",
        image,
        "--container-name",
        container,
        "-q",
        str(SUITE),
        # each component's own tests (builder/components/NAME/test_NAME.py): they skip where
        # the image does not hold it
        *(str(path) for path in components.conformance_files()),
        *extra,
    ]
    if n > 1:
        cmd += ["-n", str(n)]
    if select:
        cmd += ["-k", select]
    return cmd


def cleanup_engine() -> Engine:
    """The engine that removes the suite's container; made only when one must be removed."""
    return DockerEngine(timeout=60)


def remove_container(names: list[str], tries: int = 3, engine: Engine | None = None) -> None:
    """Remove containers NAMES, again after a moment: a `docker run` cut short may still create one."""
    try:
        engine = engine or cleanup_engine()
        for i in range(tries):
            for name in names:
                try:
                    engine.remove_container(name)
                except EngineError:
                    pass  # refused (e.g. removal already in progress): the next try may succeed
            if i + 1 < tries:
                time.sleep(1)
    except Exception as exc:  # cleanup must not replace the interrupt
        print(f"warning: could not remove the test container {name}: {exc}", file=sys.stderr, flush=True)


def run(
    image: str,
    extra: list[str],
    select: str | None = None,
    stdout=None,
    cmd: list[str] | None = None,
    container: str | None = None,
) -> int:
    """Run the suite; return pytest's exit code. On an interrupt pytest is stopped (SIGINT,
    so it tears down; killed after 15 s), its container removed, and Interrupted re-raised."""
    container = container or f"builder-conformance-{uuid.uuid4().hex[:12]}"
    n = 1 if cmd else workers()
    tmp = tempfile.mkdtemp(prefix="builder-test-")
    try:
        # Its own session: a terminal's Ctrl-C reaches the builder, which stops pytest in order.
        proc = subprocess.Popen(
            cmd or command(image, extra, select, container, n),
            stdout=stdout,
            start_new_session=True,
            env=temporary_env(tmp),
        )
        try:
            return proc.wait()
        except (Interrupted, KeyboardInterrupt):
            _stop(proc)
            remove_container(container_names(container, n))
            raise
    finally:  # after pytest has ended or been stopped: nothing writes there any more
        shutil.rmtree(tmp, ignore_errors=True)


def temporary_env(tmp: str) -> dict[str, str]:
    """The environment with every temporary file of pytest and its tests under TMP:
    pytest's basetemp root (PYTEST_DEBUG_TEMPROOT wins over TMPDIR there) and TMPDIR."""
    return {**os.environ, "TMPDIR": tmp, "PYTEST_DEBUG_TEMPROOT": tmp}


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        try:  # its whole session (xdist's workers too), so that none writes on into its TMPDIR
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
