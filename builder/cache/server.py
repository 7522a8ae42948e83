"""Running the cache server: nginx in the foreground (or detached) with a janitor that
keeps the stored objects under --max-size, oldest first; and stopping it."""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from builder.cache.config import CacheServer
from builder.cache.state import open_state, recorded_pid, running_pid, serves_here
from builder.core.errors import UserError
from builder.core.outputdir import open_new, write_new
from builder.core.terminal import say
from builder.core.userfiles import shown
from builder.registry.registry_auth import exchange


def nginx_binary() -> str:
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if exe is None:
        raise UserError("nginx is not installed (run `bash scripts/setup.sh`, which installs it)")
    return exe


def prune(server: CacheServer) -> int:
    """Delete the oldest objects until the store fits max_size; return bytes freed."""
    files = [(p.stat().st_mtime, p.stat().st_size, p) for p in server.data.rglob("*") if p.is_file()]
    total = sum(size for _, size, _ in files)
    freed = 0
    for _, size, path in sorted(files):
        if total - freed <= server.max_size:
            break
        try:
            path.unlink()
            freed += size
        except OSError:
            pass
    return freed


def run_server(server: CacheServer, detach: bool = False) -> str:
    """Run the cache server for SERVER's directory until a signal stops it (DETACH: in a new
    session, returning once it answers); its URL."""
    if running_pid(server):
        raise UserError(f"a cache server already runs for {server.directory} (builder cache stop --dir ...)")
    exe = nginx_binary()
    conf_text = server.nginx_conf()  # every value checked before anything is written
    state = open_state(server)
    try:
        return _serve_in(server, state, exe, conf_text, detach)
    finally:
        os.close(state)


def _write_state(server: CacheServer, state: int, conf_text: str) -> None:
    """The write credential, nginx.conf and server.json, each a new file in STATE."""
    try:
        credentials = server.write_htpasswd(state)
        write_new("nginx.conf", conf_text, state)
        server.save(state)
    except OSError as exc:
        raise UserError(f"cannot write the cache server's state in {shown(server.state)} ({exc.strerror})") from None
    if credentials:
        say(
            f"compile cache: writes from other machines need the credential in {credentials} "
            "(reads are open; builds on this machine write without it)"
        )


def _serve_in(server: CacheServer, state: int, exe: str, conf_text: str, detach: bool) -> str:
    """run_server() with its state directory open as STATE."""
    _write_state(server, state, conf_text)
    conf = server.state / "nginx.conf"
    check = subprocess.run([exe, "-t", "-q", "-c", str(conf), "-p", str(server.state)], capture_output=True, text=True)
    if check.returncode != 0:
        lines = check.stderr.strip().splitlines() or ["(no message)"]
        last = next((line for line in lines if "[emerg]" in line), lines[-1])
        raise UserError(f"nginx refused the configuration: {last}")
    if detach:
        args = [
            sys.executable,
            "-m",
            "builder.cli",
            "cache",
            "serve",
            "--dir",
            str(server.directory),
            "--port",
            str(server.port),
            "--listen",
            server.listen,
            "--max-size",
            str(server.max_size),
            "--max-object-size",
            str(server.max_object_size),
        ]
        if server.credentials_file:
            args += ["--write-credentials-file", str(server.credentials_file)]
        log = open_new("serve.log", state)  # this run's log, never written through a planted link
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        finally:
            os.close(log)
        for _ in range(50):
            if _answers(server):
                return server.url
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        raise UserError(f"the cache server did not start; see {server.state}/serve.log and error.log")
    write_new("serve.pid", str(os.getpid()), state)
    nginx = subprocess.Popen([exe, "-c", str(conf), "-p", str(server.state)])
    stop = {"now": False}

    def on_signal(signum, _frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    say(f"compile cache serving {server.data} at {server.url} (max {server.max_size >> 20} MiB)")

    try:
        while not stop["now"] and nginx.poll() is None:
            prune(server)
            for _ in range(50):
                if stop["now"] or nginx.poll() is not None:
                    break
                time.sleep(0.1)
    finally:
        if nginx.poll() is None:
            nginx.send_signal(signal.SIGQUIT)
            try:
                nginx.wait(10)
            except subprocess.TimeoutExpired:
                nginx.kill()
        try:
            os.unlink("serve.pid", dir_fd=state)
        except FileNotFoundError:
            pass
    return server.url


def _answers(server: CacheServer) -> bool:
    try:  # any status is an answer (404 too); within 2 s in all, whatever the peer sends
        exchange("GET", "http", server.url.removeprefix("http://"), "/.ping", {}, None, deadline=2, limit=0)
    except (OSError, http.client.HTTPException):
        return False
    return True


def stop(server: CacheServer) -> bool:
    """SIGTERM to this directory's `cache serve`; False when none runs (no serve.pid, or
    its process is gone). A serve.pid naming anything else (a planted pid, -1, 0) is
    refused in one line: nothing is signalled."""
    pid = recorded_pid(server)
    if pid is None or (pid and not os.path.exists(f"/proc/{pid}")):
        return False
    if not pid or not serves_here(pid, server):
        raise UserError(f"{shown(server.state / 'serve.pid')}: not a cache server started here; nothing stopped")
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not running_pid(server):
            return True
        time.sleep(0.1)
    return True
