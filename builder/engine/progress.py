"""What a build or push shows on the terminal while it runs: the `--progress` mode (one
type, parsed once at the command line) and the Progress printer that honours it."""

from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import contextmanager
from enum import Enum
from typing import Callable, Iterator

from builder.core.errors import UserError
from builder.core.redact import redact

HEARTBEAT_SECONDS = 30.0


class ProgressMode(str, Enum):
    """`--progress` (Docker's names): auto = one updating line on a terminal, step lines
    otherwise; plain = step lines and every build log line; quiet = nothing but the result;
    rawjson = the engine's own progress messages, one JSON object per line."""

    AUTO = "auto"
    PLAIN = "plain"
    QUIET = "quiet"
    RAWJSON = "rawjson"

    def __str__(self) -> str:  # messages show the word, not the member
        return self.value


PROGRESS_MODES = tuple(mode.value for mode in ProgressMode)


def progress_mode(value: str) -> ProgressMode:
    """The mode --progress VALUE names, or one line saying which there are."""
    try:
        return ProgressMode(value)
    except ValueError:
        raise UserError(f"--progress {str(value)[:20]!r}: use one of {', '.join(PROGRESS_MODES)}") from None


class Progress:
    """One updating status line on a terminal; plain step lines otherwise, and in that
    case a heartbeat line whenever nothing was printed for HEARTBEAT_SECONDS (a silent
    step, such as the base's apt-get, must not look like a hung build in a CI log).
    MODE: plain adds the build's log lines (on_log), rawjson prints only the engine's
    messages (on_raw), quiet nothing."""

    def __init__(
        self,
        label: str,
        stream=sys.stderr,
        mode: ProgressMode = ProgressMode.AUTO,
        clock: Callable[[], float] = time.monotonic,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ):
        self.label, self.stream, self.mode = label, stream, progress_mode(mode)
        self.silent = self.mode in (ProgressMode.QUIET, ProgressMode.RAWJSON)  # no lines of our own
        self.tty = stream.isatty() and self.mode == ProgressMode.AUTO
        self.clock, self.heartbeat_seconds = clock, heartbeat_seconds
        self.start = clock()
        self.last_line = self.start
        self.step = ""
        self._lock = threading.Lock()  # the heartbeat thread writes too

    def on_log(self, text: str) -> None:
        """A piece of the build's own output: printed, redacted, with --progress plain."""
        if self.mode != ProgressMode.PLAIN or not text:
            return
        with self._lock:
            self.stream.write(redact(text) if text.endswith("\n") else redact(text) + "\n")
            self.stream.flush()
            self.last_line = self.clock()

    def on_raw(self, message: dict) -> None:
        """One of the engine's progress messages: a JSON line, redacted, with --progress rawjson."""
        if self.mode != ProgressMode.RAWJSON:
            return
        with self._lock:
            self.stream.write(redact(json.dumps(message, separators=(",", ":"))) + "\n")
            self.stream.flush()

    def elapsed(self) -> str:
        s = int(self.clock() - self.start)
        return f"{s // 60:02d}:{s % 60:02d}"

    def on_step(self, n: int, total: int, instruction: str) -> None:
        self.step = f"step {n}/{total}: {instruction}"
        if self.silent:
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
        if self.silent or self.tty:
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
        if self.silent or self.tty:
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
        if self.tty and not self.silent:
            self.stream.write("\r\033[K")
        if not self.silent:
            with self._lock:
                self.stream.write(f"{self.label} +{self.elapsed()} {message}\n")
                self.stream.flush()
