"""The shared compile cache: an nginx WebDAV server (Debian's nginx) that ccache's HTTP
remote storage and bazel's --remote_cache both speak to. Builds reach it through the
host network; other build machines through --listen.

`serve` runs nginx in the foreground (or detached) and a janitor that keeps the stored
objects under --max-size, oldest first; `stats` reads the size on disk and the hit rate
from nginx's access log (a GET answered 200 is a hit, 404 a miss).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from builder.errors import UserError

DEFAULT_PORT = 8742
SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    unit = t[-1] if t and t[-1] in SIZE_UNITS else ""
    number = t[:-1] if unit else t
    try:
        value = float(number)
    except ValueError:
        raise UserError(f"'{text}' is not a size (examples: 500M, 20G)") from None
    if value <= 0:
        raise UserError(f"size '{text}' must be positive")
    return int(value * SIZE_UNITS[unit])


def default_dir() -> Path:
    from builder.build import cache_dir

    return cache_dir() / "compile-cache"


@dataclass(frozen=True)
class CacheServer:
    directory: Path
    port: int = DEFAULT_PORT
    listen: str = "127.0.0.1"
    max_size: int = 20 << 30
    max_object_size: str = "512m"

    @property
    def state(self) -> Path:
        return self.directory / ".server"

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.listen in ("0.0.0.0", "127.0.0.1") else self.listen
        return f"http://{host}:{self.port}"

    def save(self) -> None:
        import json

        (self.state / "server.json").write_text(json.dumps(
            {"port": self.port, "listen": self.listen, "max_size": self.max_size,
             "max_object_size": self.max_object_size}))

    @classmethod
    def load(cls, directory: Path) -> "CacheServer":
        """The server as last started for this directory (defaults when never started)."""
        import json

        try:
            saved = json.loads((Path(directory) / ".server" / "server.json").read_text())
        except (OSError, ValueError):
            saved = {}
        return cls(Path(directory), **saved)

    def nginx_conf(self) -> str:
        user = "user root;\n" if os.geteuid() == 0 else ""
        temp = self.state / "tmp"
        return f"""{user}daemon off;
worker_processes 2;
pid {self.state}/nginx.pid;
error_log {self.state}/error.log warn;
events {{ worker_connections 512; }}
http {{
    log_format cache '$request_method $status $body_bytes_sent $request_length $uri';
    access_log {self.state}/access.log cache;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    server {{
        listen {self.listen}:{self.port};
        root {self.data};
        client_max_body_size {self.max_object_size};
        location / {{
            dav_methods PUT DELETE;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }}
    }}
}}
"""


def nginx_binary() -> str:
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if exe is None:
        raise UserError("nginx is not installed (run `bash scripts/setup.sh`, which installs it)")
    return exe


def _running_pid(server: CacheServer) -> int | None:
    pid_file = server.state / "serve.pid"
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


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


def serve(server: CacheServer, detach: bool = False) -> str:
    if _running_pid(server):
        raise UserError(f"a cache server already runs for {server.directory} (builder cache stop --dir ...)")
    exe = nginx_binary()
    for d in (server.data, server.state / "tmp"):
        d.mkdir(parents=True, exist_ok=True)
    conf = server.state / "nginx.conf"
    conf.write_text(server.nginx_conf())
    server.save()
    check = subprocess.run([exe, "-t", "-q", "-c", str(conf), "-p", str(server.state)], capture_output=True, text=True)
    if check.returncode != 0:
        raise UserError(f"nginx refused the configuration: {check.stderr.strip().splitlines()[-1]}")
    if detach:
        args = [sys.executable, "-m", "builder.cli", "cache", "serve", "--dir", str(server.directory),
                "--port", str(server.port), "--listen", server.listen, "--max-size", str(server.max_size),
                "--max-object-size", server.max_object_size]
        log = open(server.state / "serve.log", "ab")
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        for _ in range(50):
            if _answers(server):
                return server.url
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        raise UserError(f"the cache server did not start; see {server.state}/serve.log and error.log")
    (server.state / "serve.pid").write_text(str(os.getpid()))
    nginx = subprocess.Popen([exe, "-c", str(conf), "-p", str(server.state)])
    stop = {"now": False}

    def on_signal(signum, _frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"compile cache serving {server.data} at {server.url} (max {server.max_size >> 20} MiB)",
          file=sys.stderr, flush=True)
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
        (server.state / "serve.pid").unlink(missing_ok=True)
    return server.url


def _answers(server: CacheServer) -> bool:
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(f"{server.url}/.ping", timeout=1)
    except urllib.error.HTTPError:
        return True  # 404 is an answer
    except OSError:
        return False
    return True


def stop(server: CacheServer) -> bool:
    pid = _running_pid(server)
    if not pid:
        return False
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not _running_pid(server):
            return True
        time.sleep(0.1)
    return True


def stats(server: CacheServer) -> dict:
    files = [p for p in server.data.rglob("*") if p.is_file()] if server.data.exists() else []
    gets = hits = misses = puts = put_errors = 0
    log = server.state / "access.log"
    if log.exists():
        for line in log.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            method, status = parts[0], parts[1]
            if parts[-1] == "/.ping":  # the server's own readiness probe
                continue
            if method in ("GET", "HEAD"):
                gets += 1
                hits += status == "200"
                misses += status == "404"
            elif method == "PUT":
                puts += 1
                put_errors += not status.startswith("2")
    return {
        "directory": str(server.directory),
        "running": _running_pid(server) is not None,
        "url": server.url,
        "objects": len(files),
        "size_bytes": sum(p.stat().st_size for p in files),
        "lookups": gets,
        "hits": hits,
        "misses": misses,
        "hit_rate": round(hits / gets, 3) if gets else 0.0,
        "stores": puts,
        "store_errors": put_errors,
    }
