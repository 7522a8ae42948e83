"""The shared compile cache: an nginx WebDAV server (Debian's nginx) that ccache's HTTP
remote storage and bazel's --remote_cache both speak to. Builds reach it through the
host network; other build machines through --listen.

`serve` runs nginx in the foreground (or detached) and a janitor that keeps the stored
objects under --max-size, oldest first; `stats` reads the size on disk and the hit rate
from nginx's access log (a GET answered 200 is a hit, 404 a miss).
"""
from __future__ import annotations

import base64
import errno
import hashlib
import ipaddress
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from builder.core import paths
from builder.core.errors import UserError, say
from builder.core.grammar import SIZE
from builder.core.outputdir import DIR_FLAGS, open_new, write_new
from builder.core.urls import read_credentials
from builder.core.userfiles import UserFileError, read_user_tail, read_user_text, shown
from builder.registry.registry_auth import exchange

_STATE_MAX = 64 << 10  # the server's own small state files (server.json, serve.pid)
_LOG_TAIL = 64 << 20  # stats counts the last 64 MiB of the access log (a busy cache's log grows without bound)
_NGINX_TEMP = ("body", "proxy", "fastcgi", "uwsgi", "scgi")  # nginx.conf's *_temp_path, under .server/tmp
_NGINX_FILES = ("nginx.pid", "error.log", "access.log")  # what nginx itself writes in .server

DEFAULT_PORT = 8742
SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# 512M, 2G, 1.5g, 20GiB, 1048576: the whole string, nothing else (it reaches nginx.conf).
MAX_OBJECT = 64 << 30
WRITE_USER = "builder"


def parse_size(text: str, what: str = "size") -> int:
    m = SIZE.fullmatch(text)
    if m is None:
        raise UserError(f"{what} {text[:40]!r} is not a size (examples: 512M, 20G)")
    value = int(float(m["number"]) * SIZE_UNITS[m["unit"].lower()])
    if value <= 0:
        raise UserError(f"{what} {text!r} must be positive")
    return value


def nginx_string(value: str, what: str) -> str:
    """VALUE as one nginx.conf string: double-quoted, `\\` and `"` escaped; `$` (nginx
    would expand it as a variable), control characters and undecodable bytes (a non-UTF-8
    path from argv: nginx.conf is written as UTF-8) refused."""
    if re.search(r"[\x00-\x1f\x7f$]", value):
        raise UserError(f"{what} {value[:80]!r} holds '$' or a control character, which nginx.conf cannot hold")
    if re.search(r"[\ud800-\udfff]", value):
        raise UserError(f"{what} {value[:80]!r} holds undecodable bytes (not UTF-8), which nginx.conf cannot hold")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def check_address(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise UserError(f"--listen {text[:60]!r} is not an IP address (127.0.0.1, 0.0.0.0, ::1, ...)") from None


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


# Docker's bridges: docker0, and br-<id> for user-defined networks.
DOCKER_BRIDGE = re.compile(r"docker\d*|br-[0-9a-f]{12}")


def docker_bridge_subnet(address: str, ip_addr_output: str) -> str | None:
    """The subnet of the Docker bridge whose address ADDRESS is, from `ip -o addr show`
    (e.g. 172.17.0.0/16 for docker0's 172.17.0.1); None for any other address. A server
    listening there serves this machine's own build containers, which write from that
    subnet without credentials, as builds on the host network write from loopback."""
    for line in ip_addr_output.splitlines():
        fields = line.split()
        if len(fields) >= 4 and DOCKER_BRIDGE.fullmatch(fields[1]) and fields[2] in ("inet", "inet6"):
            iface = ipaddress.ip_interface(fields[3])
            if str(iface.ip) == address:
                return str(iface.network)
    return None


def _ip_addr_output() -> str:
    try:
        return subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def check_directory(directory: Path) -> Path:
    """DIRECTORY is a directory, or could be made one (nothing is created here)."""
    d = Path(directory).absolute()
    if d.exists() and not d.is_dir():
        raise UserError(f"--dir {directory} is not a directory")
    probe = d
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"--dir {directory}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK) and probe != d:
        raise UserError(f"--dir {directory}: cannot create it under {probe} (permission denied)")
    if probe == d and not os.access(d, os.W_OK | os.X_OK):
        raise UserError(f"--dir {directory}: not writable")
    for path in (d, d / ".server", d / "data"):
        nginx_string(str(path), "--dir")
    return d


def ssha(password: str) -> str:
    """An nginx-readable password hash ({SSHA}: salted SHA-1; the generated passwords are
    32 random characters, a user's own file is the user's choice)."""
    salt = secrets.token_bytes(8)
    return "{SSHA}" + base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()


def default_dir() -> Path:
    return paths.compile_cache_dir()


@dataclass(frozen=True)
class CacheServer:
    directory: Path
    port: int = DEFAULT_PORT
    listen: str = "127.0.0.1"
    max_size: int = 20 << 30
    max_object_size: int = 512 << 20
    credentials_file: Path | None = None  # USER:PASSWORD for writes from other machines

    @classmethod
    def checked(cls, directory: Path, port: int, listen: str, max_size: str, max_object_size: str,
                credentials_file: Path | None = None) -> "CacheServer":
        """Every option typed and checked, before anything is written."""
        if not 0 < port < 65536:
            raise UserError(f"--port {port} is not a TCP port (1-65535)")
        listen = check_address(listen)
        size = parse_size(max_size, "--max-size")
        object_size = parse_size(max_object_size, "--max-object-size")
        if object_size > MAX_OBJECT:
            raise UserError(f"--max-object-size {max_object_size} is more than {MAX_OBJECT >> 30}G")
        if credentials_file is not None:
            read_credentials(Path(credentials_file), None, "--write")
        return cls(check_directory(directory), port, listen, size, object_size,
                   Path(credentials_file).absolute() if credentials_file else None)

    @property
    def state(self) -> Path:
        return self.directory / ".server"

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def url(self) -> str:
        if self.listen in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        else:
            host = f"[{self.listen}]" if ":" in self.listen else self.listen
        return f"http://{host}:{self.port}"

    @property
    def needs_write_auth(self) -> bool:
        return not is_loopback(self.listen)

    @property
    def htpasswd(self) -> Path:
        return self.state / "htpasswd"

    @property
    def generated_credentials(self) -> Path:
        return self.state / "write-credentials"

    def save(self, state_fd: int) -> None:
        """server.json, written as a new file in the open state directory STATE_FD."""
        import json

        write_new("server.json", json.dumps(
            {"port": self.port, "listen": self.listen, "max_size": self.max_size,
             "max_object_size": self.max_object_size,
             "credentials_file": str(self.credentials_file) if self.credentials_file else None}), state_fd)

    @classmethod
    def load(cls, directory: Path) -> "CacheServer":
        """The server as last started for this directory (defaults when never started)."""
        import json

        try:
            # in the user's directory: read as a user's file (a fifo planted there never blocks)
            saved = json.loads(read_user_text(Path(directory) / ".server" / "server.json", "cache state", _STATE_MAX))
            if isinstance(saved.get("max_object_size"), str):  # written by an older builder
                saved["max_object_size"] = parse_size(saved["max_object_size"])
            if saved.get("credentials_file"):
                saved["credentials_file"] = Path(saved["credentials_file"])
            return cls(Path(directory), **saved)
        except (OSError, ValueError, TypeError, UserError):
            return cls(Path(directory))

    def nginx_conf(self) -> str:
        """nginx.conf for this server: every value typed, every path quoted by nginx_string."""
        q = lambda path: nginx_string(str(path), "--dir")  # noqa: E731
        user = "user root;\n" if os.geteuid() == 0 else ""
        temp = self.state / "tmp"
        listen = f"[{self.listen}]" if ":" in self.listen else self.listen
        writes = ""
        if self.needs_write_auth:
            # Reads stay open; writes come from this machine (its builds, through the
            # host network or, on a Docker bridge's address, from its containers) or
            # carry the write credential.
            local = ["127.0.0.1", "::1"] + ([self.listen] if self.listen not in ("0.0.0.0", "::") else [])
            bridge = docker_bridge_subnet(self.listen, _ip_addr_output())
            local += [bridge] if bridge else []  # this machine's build containers (docker0)
            allow = "".join(f"                allow {a};\n" for a in local)
            writes = (f"            satisfy any;\n            limit_except GET HEAD {{\n{allow}"
                      f"                deny all;\n                auth_basic \"compile cache writes\";\n"
                      f"                auth_basic_user_file {q(self.htpasswd)};\n            }}\n")
        return f"""{user}daemon off;
worker_processes 2;
pid {q(self.state / "nginx.pid")};
error_log {q(self.state / "error.log")} warn;
events {{ worker_connections 512; }}
http {{
    log_format cache '$request_method $status $body_bytes_sent $request_length $uri';
    access_log {q(self.state / "access.log")} cache;
    client_body_temp_path {q(temp / "body")};
    proxy_temp_path {q(temp / "proxy")};
    fastcgi_temp_path {q(temp / "fastcgi")};
    uwsgi_temp_path {q(temp / "uwsgi")};
    scgi_temp_path {q(temp / "scgi")};
    server {{
        listen {listen}:{int(self.port)};
        root {q(self.data)};
        client_max_body_size {int(self.max_object_size)};
        location / {{
            dav_methods PUT DELETE;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
{writes}        }}
    }}
}}
"""

    def write_htpasswd(self, state_fd: int) -> Path | None:
        """The write credential's hash for nginx; generated (and kept, 0600) when the user
        gave none. Returns the file holding USER:PASSWORD for clients. Both are written
        as new files in the open state directory STATE_FD, never through a planted link."""
        if not self.needs_write_auth:
            return None

        source = self.credentials_file or self.generated_credentials
        if self.credentials_file is None and not _is_regular(state_fd, source.name):
            write_new(source.name, f"{WRITE_USER}:{secrets.token_urlsafe(24)}\n", state_fd, 0o600)
        user, password = read_credentials(source, None, "--write")
        tmp = self.htpasswd.name + ".tmp"
        write_new(tmp, f"{user}:{ssha(password)}\n", state_fd, 0o600)
        os.replace(tmp, self.htpasswd.name, src_dir_fd=state_fd, dst_dir_fd=state_fd)
        return source


def nginx_binary() -> str:
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if exe is None:
        raise UserError("nginx is not installed (run `bash scripts/setup.sh`, which installs it)")
    return exe


def _mode(dir_fd: int, name: str) -> int | None:
    """The type and mode of NAME inside DIR_FD, a link not followed; None when missing."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None


def _is_regular(dir_fd: int, name: str) -> bool:
    mode = _mode(dir_fd, name)
    return mode is not None and stat.S_ISREG(mode)


def _subdir(parent_fd: int, name: str, where: Path) -> int:
    """The directory NAME inside PARENT_FD (created 0700 when missing), opened without
    following a link in its place: a link or a file there is refused in one line."""
    try:
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            pass
        return os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UserError(f"{shown(where)} is a symlink or not a directory; the cache server keeps its state "
                            "only in a directory of its own: remove it") from None
        raise UserError(f"--dir: cannot create {shown(where)} ({exc.strerror})") from None


def _open_state(server: CacheServer) -> int:
    """D/.server (0700) and its nginx temp directories, each opened without following a
    link; nginx's own files there that are not regular files (a planted link, a fifo) are
    removed first. The builder writes its state only through the descriptor returned, each
    file as a new one, so nothing planted in D is written through or waited on. D itself
    and D/data are the user's, as given (a link there is the user's choice)."""
    try:
        server.data.mkdir(parents=True, exist_ok=True)
        top = os.open(server.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(f"--dir {shown(server.directory)}: cannot create it ({exc.strerror})") from None
    try:
        state = _subdir(top, ".server", server.state)
    finally:
        os.close(top)
    try:
        os.fchmod(state, 0o700)
        tmp = _subdir(state, "tmp", server.state / "tmp")
        try:
            for name in _NGINX_TEMP:
                os.close(_subdir(tmp, name, server.state / "tmp" / name))
        finally:
            os.close(tmp)
        for name in _NGINX_FILES:
            if _mode(state, name) is not None and not _is_regular(state, name):
                os.unlink(name, dir_fd=state)
    except OSError as exc:
        os.close(state)
        raise UserError(f"cannot prepare {shown(server.state)} ({exc.strerror})") from None
    except BaseException:
        os.close(state)
        raise
    return state


def _recorded_pid(server: CacheServer) -> int | None:
    """The pid serve.pid names: None when there is no such file, 0 when it holds anything
    but a pid above 1 (-1 would signal every process, 0 the group, 1 init)."""
    try:
        text = read_user_text(server.state / "serve.pid", "cache state", _STATE_MAX).strip()
    except UserFileError as exc:
        return None if exc.missing else 0
    return int(text) if re.fullmatch(r"[0-9]{1,9}", text) and int(text) > 1 else 0


def _children(pid: int) -> list[int]:
    """The processes whose parent is PID (from /proc/N/stat: the field after the comm)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read(4096).rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 1 and fields[1] == str(pid).encode():
            found.append(int(entry))
    return found


def _nginx_prefix(pid: int) -> str | None:
    """The -p directory of the nginx master PID, started as serve starts it
    (`nginx -c PREFIX/nginx.conf -p PREFIX`); None for any other process. The master
    shows its arguments joined by spaces after `nginx: master process `."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read(1 << 16).rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "surrogateescape")
    except OSError:
        return None
    text = text.removeprefix("nginx: master process ")
    if os.path.basename(text.split(" ", 1)[0]) != "nginx":
        return None
    for at in (i for i in range(len(text)) if text.startswith(" -p ", i)):
        prefix = text[at + 4:]
        if text.endswith(f" -c {prefix}/nginx.conf -p {prefix}"):
            return prefix
    return None


def _serves_here(pid: int, server: CacheServer) -> bool:
    """PID is this directory's `cache serve`: the parent of an nginx master whose prefix
    is this very state directory. A pid planted in serve.pid names no such process."""
    try:
        state = os.stat(server.state, follow_symlinks=False)
    except OSError:
        return False
    for child in _children(pid):
        prefix = _nginx_prefix(child)
        try:
            if prefix is not None and os.path.samestat(os.stat(prefix, follow_symlinks=False), state):
                return True
        except OSError:
            continue
    return False


def _running_pid(server: CacheServer) -> int | None:
    pid = _recorded_pid(server)
    return pid if pid and _serves_here(pid, server) else None


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
    conf_text = server.nginx_conf()  # every value checked before anything is written
    state = _open_state(server)
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
        say(f"compile cache: writes from other machines need the credential in {credentials} "
            "(reads are open; builds on this machine write without it)")


def _serve_in(server: CacheServer, state: int, exe: str, conf_text: str, detach: bool) -> str:
    """serve() with its state directory open as STATE."""
    _write_state(server, state, conf_text)
    conf = server.state / "nginx.conf"
    check = subprocess.run([exe, "-t", "-q", "-c", str(conf), "-p", str(server.state)], capture_output=True, text=True)
    if check.returncode != 0:
        lines = check.stderr.strip().splitlines() or ["(no message)"]
        last = next((line for line in lines if "[emerg]" in line), lines[-1])
        raise UserError(f"nginx refused the configuration: {last}")
    if detach:
        args = [sys.executable, "-m", "builder.cli", "cache", "serve", "--dir", str(server.directory),
                "--port", str(server.port), "--listen", server.listen, "--max-size", str(server.max_size),
                "--max-object-size", str(server.max_object_size)]
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
    import http.client

    try:  # any status is an answer (404 too); within 2 s in all, whatever the peer sends
        exchange("GET", "http", server.url.removeprefix("http://"), "/.ping", {}, None, deadline=2, limit=0)
    except (OSError, http.client.HTTPException):
        return False
    return True


def stop(server: CacheServer) -> bool:
    """SIGTERM to this directory's `cache serve`; False when none runs (no serve.pid, or
    its process is gone). A serve.pid naming anything else (a planted pid, -1, 0) is
    refused in one line: nothing is signalled."""
    pid = _recorded_pid(server)
    if pid is None or (pid and not os.path.exists(f"/proc/{pid}")):
        return False
    if not pid or not _serves_here(pid, server):
        raise UserError(f"{shown(server.state / 'serve.pid')}: not a cache server started here; nothing stopped")
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not _running_pid(server):
            return True
        time.sleep(0.1)
    return True


def stats(server: CacheServer) -> dict:
    files = [p for p in server.data.rglob("*") if p.is_file()] if server.data.exists() else []
    gets = hits = misses = puts = put_errors = 0
    for line in _log_lines(server):
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


def _log_lines(server: CacheServer) -> list[str]:
    """The access log's lines, its last _LOG_TAIL bytes (a cut first line dropped); none
    when there is no log. Read as a user's file: a fifo or a device there is one line."""
    try:
        data = read_user_tail(server.state / "access.log", "cache log", _LOG_TAIL)
    except UserFileError as exc:
        if exc.missing:
            return []
        raise
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[1:] if len(data) == _LOG_TAIL else lines


def stats_text(s: dict) -> str:
    """`builder cache stats` for people."""
    return "\n".join([
        f"{s['directory']}: {'running at ' + s['url'] if s['running'] else 'not running'}",
        f"  {s['objects']} objects, {s['size_bytes'] / 1e6:.1f} MB",
        f"  {s['lookups']} lookups: {s['hits']} hits, {s['misses']} misses (hit rate {s['hit_rate']:.0%}); "
        f"{s['stores']} stores, {s['store_errors']} refused"])
