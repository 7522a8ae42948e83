"""One SIGINT/SIGTERM handler for the whole command, installed at CLI entry before any
work: the first signal raises Interrupted wherever the command is (so every `with` and
`finally` cleans up: temporary contexts, build and test containers); further signals
while that cleanup runs are noted and ignored, so it is never cut short."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any, Callable

from builder.core.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []


def handler(signum: int, _frame: Any) -> None:
    if _received:
        print(f"{signal.Signals(signum).name} again: still cleaning up, please wait", file=sys.stderr, flush=True)
        return
    _received.append(signum)
    raise Interrupted(signum)


def install() -> Callable[[], None]:
    """Install the handler (main thread only); return a function restoring the previous ones."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    _received.clear()
    previous = {s: signal.signal(s, handler) for s in SIGNALS}

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore
