"""What a CI log needs to explain a failure it cannot reproduce: the machine's free disk
and memory when the run starts, the least free disk seen after any test (images,
registries and a second engine's data root all land on it), and the Docker engine's own
memory after each test (dockerd 26.1 has been seen to grow from 0.3 to 23 GB within two
minutes and thrash until the kernel killed it: a run then hangs; the log names the test
after which it happened, at once, not only at the end)."""
from __future__ import annotations

import os
import shutil

import pytest

WATCHED = ("/var/lib/docker", "/tmp")
DOCKERD_PID = "/var/run/docker.pid"
DOCKERD_WARN = 4 << 30  # bytes of resident memory
lowest: dict[str, tuple[int, str]] = {}
engine_peak: list = [0, ""]  # bytes, after which test


def dockerd_rss() -> int | None:
    """The main Docker engine's resident memory in bytes (None when it is not running)."""
    try:
        pid = open(DOCKERD_PID).read().strip()
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return None


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
    rss = dockerd_rss()
    if rss is not None and rss > engine_peak[0]:
        if rss > DOCKERD_WARN and engine_peak[0] <= DOCKERD_WARN:
            reporter = item.config.pluginmanager.get_plugin("terminalreporter")
            if reporter:
                reporter.write_line(f"\nwarning: dockerd holds {rss / 2**30:.1f} GiB after {item.nodeid}")
        engine_peak[:] = [rss, item.nodeid]


def pytest_terminal_summary(terminalreporter) -> None:
    for path, (free, nodeid) in sorted(lowest.items()):
        terminalreporter.write_line(f"least free disk on {path}: {free / 1e9:.1f} GB, after {nodeid}")
    if engine_peak[0]:
        terminalreporter.write_line(f"dockerd's largest resident memory: {engine_peak[0] / 2**30:.1f} GiB, "
                                    f"after {engine_peak[1]}")
