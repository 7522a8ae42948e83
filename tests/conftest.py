"""What a CI log needs to explain a failure it cannot reproduce: the machine's free disk
and memory when the run starts, the least free disk and the Docker engine's largest memory,
sampled every second by a thread (a build's peak falls inside a test, not between tests),
each named with the test it happened in, as a warning line at once and in the summary
(dockerd 26.1 has been seen to grow from 0.3 to 23 GB within two minutes and thrash until
the kernel killed it; a full disk stalls the engine). And a time budget for the whole run:
CI stops at 90 minutes and a run cut off there prints nothing, so once the budget is spent
the remaining tests fail at once, saying why, and the run still prints its results."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

WATCHED = ("/var/lib/docker", "/tmp")
ENGINE_ROOT = WATCHED[0]
MODULE_DISK_SHOWN = 1e9  # a module whose peak stayed below this is not listed
DOCKERD_PID = "/var/run/docker.pid"
DOCKERD_WARN = 4 << 30  # bytes of resident memory
DISK_WARN = float(
    os.environ.get("TEST_DISK_WARN", 8e9)
)  # bytes free: a release build and its export need about this much
# seconds for the whole pytest run: CI allows 90 minutes, setup on a fresh machine included
BUDGET = float(os.environ.get("TEST_TIME_BUDGET", 4500))
lowest: dict[str, tuple[int, str]] = {}
engine_peak: list = [0, ""]  # bytes, during which test


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
    return f"machine: {disk}" + (f", {mem / 1e9:.1f} GB memory available" if mem else "") + f", {os.cpu_count()} cores"


class Watch(threading.Thread):
    """Samples free disk and dockerd's memory every second, keeping the extremes of the
    whole run and of the running test."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="machine-watch")
        self.test = "(collection)"
        self.lock = threading.Lock()
        self.in_test: dict[str, int] = {}  # the running test's least free disk / largest rss
        self.module = ""
        # per test module: free disk on the engine's data root when its first test started,
        # and the least seen while it ran (the peak it used above its start)
        self.module_disk: dict[str, list[int]] = {}

    def sample(self) -> None:
        with self.lock:
            for path in WATCHED:
                free = _free(path)
                if free is None:
                    continue
                if path not in lowest or free < lowest[path][0]:
                    lowest[path] = (free, self.test)
                self.in_test[path] = min(self.in_test.get(path, free), free)
                if path == ENGINE_ROOT and self.module in self.module_disk:
                    seen = self.module_disk[self.module]
                    seen[1] = min(seen[1], free)
            rss = dockerd_rss()
            if rss is not None:
                if rss > engine_peak[0]:
                    engine_peak[:] = [rss, self.test]
                self.in_test["dockerd"] = max(self.in_test.get("dockerd", 0), rss)

    def run(self) -> None:
        while True:
            self.sample()
            time.sleep(1)

    def start_test(self, nodeid: str) -> None:
        with self.lock:
            self.test, self.in_test = nodeid, {}
            self.module = nodeid.split("::")[0]
            free = _free(ENGINE_ROOT)
            if free is not None and self.module not in self.module_disk:
                self.module_disk[self.module] = [free, free]

    def end_test(self) -> dict[str, int]:
        self.sample()
        with self.lock:
            return dict(self.in_test)


watch = Watch()


_config: list = []


def pytest_sessionstart(session) -> None:
    session.config._tfb_start = time.monotonic()
    _config.append(session.config)
    watch.start()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # before pytest-timeout's wrapper reads the marker
def pytest_runtest_protocol(item, nextitem):
    watch.start_test(item.nodeid)
    left = budget_left(item.config)
    per_test = float(item.config.getini("timeout") or 0)
    if 0 < left < per_test or (left > 0 and not per_test):
        # the test's own limit (pytest-timeout) never runs past the run's budget
        item.add_marker(pytest.mark.timeout(left), append=False)
    yield


def budget_left(config) -> float:
    return BUDGET - (time.monotonic() - getattr(config, "_tfb_start", time.monotonic()))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    if budget_left(item.config) <= 0:
        pytest.fail(f"the run's time budget ({BUDGET:.0f} s, TEST_TIME_BUDGET) is spent: not started", pytrace=False)


def pytest_runtest_logfinish(nodeid, location) -> None:
    """After the test's report, outside output capture (a line written during teardown is
    captured and lost)."""
    seen = watch.end_test()
    reporter = _config[0].pluginmanager.get_plugin("terminalreporter") if _config else None
    if not reporter:
        return
    low = {p: seen[p] for p in WATCHED if p in seen and seen[p] < DISK_WARN}
    if low:
        where = ", ".join(f"{free / 1e9:.1f} GB free on {p}" for p, free in low.items())
        reporter.write_line(f"\nwarning: {where} during {nodeid}")
    if seen.get("dockerd", 0) > DOCKERD_WARN:
        reporter.write_line(f"\nwarning: dockerd held {seen['dockerd'] / 2**30:.1f} GiB during {nodeid}")


def pytest_terminal_summary(terminalreporter) -> None:
    for path, (free, nodeid) in sorted(lowest.items()):
        terminalreporter.write_line(f"least free disk on {path}: {free / 1e9:.1f} GB, during {nodeid}")
    for module, (start, low) in watch.module_disk.items():
        if start - low >= MODULE_DISK_SHOWN:
            terminalreporter.write_line(
                f"disk used above its start by {module}: {(start - low) / 1e9:.1f} GB at "
                f"its peak ({start / 1e9:.1f} GB free when it started)"
            )
    if engine_peak[0]:
        terminalreporter.write_line(
            f"dockerd's largest resident memory: {engine_peak[0] / 2**30:.1f} GiB, during {engine_peak[1]}"
        )
