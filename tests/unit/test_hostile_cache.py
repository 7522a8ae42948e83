"""`builder cache serve|stop|stats --dir D` against a hostile D: the state
directory D/.server is never a link, every file the builder writes there is a new file
(never written through a planted link, never blocking on a fifo), stop signals only the
`cache serve` of D, and stats reads the access log as a user's file, its tail only.
The servers are Debian's real nginx on free loopback ports."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import builder
from builder import cache
from builder.cli import main as cli

pytestmark = pytest.mark.skipif(
    shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"
)

ROOT = Path(builder.__file__).parent.parent
VICTIM = "victim's own text\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args: str, timeout: float = 60, memory: int | None = None) -> tuple[int, list[str]]:
    """`builder ARGS` in a process of its own (a hang is a failure here, not a hung suite);
    MEMORY: its address space limit in bytes."""

    def limit() -> None:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    proc = subprocess.run(
        [sys.executable, "-m", "builder.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        preexec_fn=limit,
    )
    return proc.returncode, proc.stderr.strip().splitlines()


@pytest.fixture
def servers():
    """Directories whose detached servers are stopped at the end (whatever the test left)."""
    started: list[Path] = []
    yield started
    for d in started:
        try:
            cache.stop(cache.CacheServer.load(d))
        except Exception:  # noqa: BLE001 - teardown of a refused directory
            pass


def serve(d: Path, servers: list[Path], *extra: str) -> tuple[int, list[str]]:
    servers.append(d)
    return run_cli("cache", "serve", "--dir", str(d), "--port", str(free_port()), "--detach", *extra)


def victims(tmp_path: Path, names: list[str]) -> dict[str, Path]:
    out = {}
    for name in names:
        v = tmp_path / f"victim-{name}"
        v.write_text(VICTIM)
        out[name] = v
    return out


@pytest.mark.parametrize(
    "listen,names",
    [
        ("127.0.0.1", ["nginx.conf", "server.json", "serve.pid", "serve.log", "nginx.pid", "error.log", "access.log"]),
        ("0.0.0.0", ["htpasswd.tmp", "htpasswd", "write-credentials", "nginx.conf"]),
    ],
)
def test_serve_writes_nothing_through_links_planted_in_the_state_directory(tmp_path, servers, listen, names):
    d = tmp_path / "c"
    (d / ".server").mkdir(parents=True)
    planted = victims(tmp_path, names)
    for name, victim in planted.items():
        (d / ".server" / name).symlink_to(victim)
    code, err = serve(d, servers, "--listen", listen)
    assert code == 0, err
    assert {name: v.read_text() for name, v in planted.items()} == {name: VICTIM for name in planted}
    assert all(not (d / ".server" / name).is_symlink() for name in names if (d / ".server" / name).exists())
    assert "listen" in (d / ".server" / "nginx.conf").read_text()  # the server's own, written as a new file


@pytest.mark.parametrize("names", [["server.json"], ["nginx.conf", "serve.log", "htpasswd.tmp"]])
def test_serve_never_waits_on_a_fifo_in_the_state_directory(tmp_path, servers, names):
    d = tmp_path / "c"
    (d / ".server").mkdir(parents=True)
    for name in names:
        os.mkfifo(d / ".server" / name)
    servers.append(d)
    code, err = run_cli(
        "cache", "serve", "--dir", str(d), "--port", str(free_port()), "--detach", "--listen", "0.0.0.0", timeout=20
    )
    assert code == 0, err
    assert all((d / ".server" / name).is_file() or not (d / ".server" / name).exists() for name in names)


@pytest.mark.parametrize("where", [".server", ".server/tmp", ".server/tmp/body"])
def test_a_link_in_place_of_a_state_directory_is_refused_in_one_line(tmp_path, servers, where):
    d = tmp_path / "c"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    elsewhere.chmod(0o755)
    (d / where).parent.mkdir(parents=True, exist_ok=True)
    (d / where).symlink_to(elsewhere)
    code, err = serve(d, servers)
    assert code == 2 and len(err) == 1 and "is a symlink or not a directory" in err[0], err
    assert list(elsewhere.iterdir()) == [] and elsewhere.stat().st_mode & 0o777 == 0o755


def test_a_file_in_place_of_the_state_directory_is_refused_in_one_line(tmp_path, servers):
    d = tmp_path / "c"
    d.mkdir()
    (d / ".server").write_text(VICTIM)
    code, err = serve(d, servers)
    assert code == 2 and len(err) == 1 and "is a symlink or not a directory" in err[0], err
    assert (d / ".server").read_text() == VICTIM


def _stop_line(d: Path) -> tuple[int, list[str]]:
    return run_cli("cache", "stop", "--dir", str(d))


def test_stop_signals_no_process_a_planted_serve_pid_names(tmp_path, servers):
    d = tmp_path / "c"
    (d / ".server").mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        (d / ".server" / "serve.pid").write_text(str(sleeper.pid))
        code, err = _stop_line(d)
        assert code == 2 and len(err) == 1 and "not a cache server started here; nothing stopped" in err[0], err
        assert sleeper.poll() is None  # alive
    finally:
        sleeper.kill()
        sleeper.wait()
    # The directory's own server is still stopped by it.
    (d / ".server" / "serve.pid").unlink()
    assert serve(d, servers)[0] == 0
    assert cache.state.running_pid(cache.CacheServer.load(d))
    code, err = _stop_line(d)
    assert code == 0, err
    assert not (d / ".server" / "serve.pid").exists()


def test_stop_does_not_stop_the_server_of_another_directory(tmp_path, servers):
    other = tmp_path / "other"
    assert serve(other, servers)[0] == 0
    pid = (other / ".server" / "serve.pid").read_text()
    d = tmp_path / "c"
    (d / ".server").mkdir(parents=True)
    (d / ".server" / "serve.pid").write_text(pid)
    code, err = _stop_line(d)
    assert code == 2 and "nothing stopped" in err[0], err
    assert cache.state.running_pid(cache.CacheServer.load(other)) == int(pid)


@pytest.mark.parametrize("text", ["-1", "0", "1", " -1\n", "+5", "1_0", "99999999999999999999", "x"])
def test_stop_never_signals_for_a_pid_that_is_not_one(tmp_path, monkeypatch, capsys, text):
    d = tmp_path / "c"
    (d / ".server").mkdir(parents=True)
    (d / ".server" / "serve.pid").write_text(text)
    sent = []
    # -1 would signal every process, 0 this process group: recorded here, never sent
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(cache.server.time, "sleep", lambda _s: None)
    code = cli.main(["cache", "stop", "--dir", str(d)])
    err = capsys.readouterr().err.strip().splitlines()
    assert sent == [] and code == 2 and len(err) == 1 and "nothing stopped" in err[0], (sent, err)


@pytest.mark.parametrize(
    "make,msg",
    [
        (lambda p: os.mkfifo(p), "is a fifo, not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "is a character device, not a regular file"),
        (lambda p: p.mkdir(), "is a directory"),
    ],
)
def test_stats_reads_the_access_log_as_a_users_file(tmp_path, make, msg):
    d = tmp_path / "c"
    (d / ".server").mkdir(parents=True)
    make(d / ".server" / "access.log")
    code, err = run_cli("cache", "stats", "--dir", str(d), timeout=30, memory=2 << 30)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and msg in err[0], err


def test_stats_counts_the_tail_of_a_big_log(tmp_path, monkeypatch):
    d = tmp_path / "c"
    (d / ".server").mkdir(parents=True)
    line = "GET 200 10 100 /ccache/obj\n"
    (d / ".server" / "access.log").write_text("PUT 201 0 100 /ccache/obj\n" * 1000 + line * 1000)
    monkeypatch.setattr(cache.usage, "_LOG_TAIL", 100 * len(line) + 5)  # 100 lines and a cut one
    s = cache.stats(cache.CacheServer.load(d))
    assert (s["lookups"], s["hits"], s["stores"]) == (100, 100, 0)
    monkeypatch.setattr(cache.usage, "_LOG_TAIL", 64 << 20)
    s = cache.stats(cache.CacheServer.load(d))
    assert (s["lookups"], s["hits"], s["stores"]) == (1000, 1000, 1000)
