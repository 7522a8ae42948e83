"""Interrupts during a long engine operation: SIGINT and SIGTERM become Interrupted."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator

from builder.core import interrupts


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
