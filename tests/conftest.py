"""What a CI log needs to explain a failure it cannot reproduce: the machine's free disk
and memory when the run starts, and the least free disk seen after any test (images,
registries and a second engine's data root all land on it)."""
from __future__ import annotations

import os
import shutil

import pytest

WATCHED = ("/var/lib/docker", "/tmp")
lowest: dict[str, tuple[int, str]] = {}


def _free(path: str) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _memory_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return None


def pytest_report_header(config) -> str:
    disk = ", ".join(f"{_free(p) / 1e9:.1f} GB free on {p}" for p in WATCHED if _free(p) is not None)
    mem = _memory_available()
    return f"machine: {disk}" + (f", {mem / 1e9:.1f} GB memory available" if mem else "") + \
        f", {os.cpu_count()} cores"


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    for path in WATCHED:
        free = _free(path)
        if free is not None and (path not in lowest or free < lowest[path][0]):
            lowest[path] = (free, item.nodeid)


def pytest_terminal_summary(terminalreporter) -> None:
    for path, (free, nodeid) in sorted(lowest.items()):
        terminalreporter.write_line(f"least free disk on {path}: {free / 1e9:.1f} GB, after {nodeid}")
