"""The loopback daemon that serves build settings to the legacy builder (which has no
secret mounts): the build runs on the host network and the in-image wrapper fetches its
settings from here. Run as `python -m builder.engine.settings_server STATE PORT`.

One small daemon per state directory (user, BUILDER_CACHE_DIR) serves every concurrent
build on a port of its own, recorded in the state directory; each distinct set of
settings lives under an unguessable path derived from its hash, so the URL a build sees
(and with it every layer's cache key) is the same each time the same settings are used. A build
holds a shared lock on its settings while it runs; the daemon deletes settings nobody
holds (secrets included) and exits when it has none left.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import http.server
import os
import re
import secrets
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from builder.core import paths
from builder.core.errors import UserError

if TYPE_CHECKING:  # the settings model imports this module to serve its settings
    from builder.engine.buildsettings import BuildSettings

MAGIC = b"tfbuilder-settings\n"


def port() -> int | None:
    """BUILDER_SETTINGS_PORT when set (a fixed port); else the state directory's own."""
    value = os.environ.get("BUILDER_SETTINGS_PORT")
    if value is None:
        return None
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise UserError(f"BUILDER_SETTINGS_PORT={value[:20]!r} is not a TCP port")
    return int(value)


def state_dir() -> Path:
    return paths.settings_state_dir()


# Who may read settings: only processes inside a container of this engine (a build's RUN
# step on the host network). On each connection the peer's socket is found in
# /proc/net/tcp (its inode), the processes holding that inode in /proc/*/fd, and their
# /proc/PID/cgroup must name a Docker container from the cgroup root. Anyone else (a
# plain host process, any user) gets 403. This needs a daemon that can read other
# processes' /proc/PID/fd, i.e. one running as root (as dockerd's clients do here).
#
# What: only /TOKEN/NAME for a live TOKEN and a known NAME; everything else is 404 (no
# listing, no query strings, no `..`). TOKEN is HMAC-SHA256(key, settings digest) with a
# key kept in the 0700 state directory: unguessable, but the same for the same settings,
# because the URL is a build argument and so part of every layer's cache key (a random
# token per build would rebuild every layer every time).

NAMES = ("index", "pip-index", "apt-mirror", "ca.crt")
_PATH = re.compile(r"/(?P<token>[0-9a-f]{64})/(?P<name>" + "|".join(re.escape(n) for n in NAMES) + ")")
_PING = re.compile(r"/\.builder-settings/(?P<nonce>[0-9a-f]{32})")
# A container's cgroup, from the root: cgroupfs driver (/docker/ID) or systemd driver
# (/system.slice/docker-ID.scope), or a RUN step of the engine's BuildKit (plain `docker
# build` on a current engine): /docker/buildkit/ID, ID being BuildKit's 25-character one
# (measured with `RUN cat /proc/self/cgroup`). Anchored, so a user's own delegated cgroup
# subtree cannot pass by naming a sub-cgroup "docker/ID".
CONTAINER_CGROUP = re.compile(
    r"/(?:docker/[0-9a-f]{64}|system\.slice/docker-[0-9a-f]{64}\.scope"
    r"|docker/buildkit/[0-9a-z]{25})"
)
_START_LOCK = ".daemon-start"


def key(state: Path) -> bytes:
    """The state directory's secret (made once, readable only by its owner)."""
    path = state / "key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(32))
    return path.read_bytes()


def token(state: Path, digest: str) -> str:
    return hmac.new(key(state), b"settings:" + digest.encode(), hashlib.sha256).hexdigest()


def _ping_answer(state: Path, nonce: str) -> bytes:
    return MAGIC + hmac.new(key(state), b"ping:" + nonce.encode(), hashlib.sha256).hexdigest().encode()


def container_cgroup(cgroup_text: str) -> bool:
    """Does this /proc/PID/cgroup text put the process in a Docker container?"""
    for line in cgroup_text.splitlines():
        path = line.split(":", 2)[-1]
        if CONTAINER_CGROUP.fullmatch(path):
            return True
    return False


def _tcp_hex(ip: str, port: int) -> str:
    """127.0.0.1:8741 as /proc/net/tcp spells it (little-endian address, hex port)."""
    return socket.inet_aton(ip)[::-1].hex().upper() + f":{port:04X}"


def socket_inode(peer: tuple[str, int], local: tuple[str, int], table: str = "/proc/net/tcp") -> int | None:
    """The inode of the peer's end of an established loopback connection."""
    want_local, want_remote = _tcp_hex(*peer), _tcp_hex(*local)
    try:
        lines = Path(table).read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 9 and fields[1] == want_local and fields[2] == want_remote and fields[3] == "01":
            return int(fields[9])
    return None


def socket_owners(inode: int) -> list[int]:
    """Every pid holding the socket (a forked child may share it)."""
    target, owners = f"socket:[{inode}]", []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in os.scandir(proc / "fd"):
                if os.readlink(fd.path) == target:
                    owners.append(int(proc.name))
                    break
        except OSError:  # gone, or not ours to read
            continue
    return owners


def peer_in_container(peer: tuple[str, int], local: tuple[str, int]) -> bool:
    inode = socket_inode(peer, local)
    owners = socket_owners(inode) if inode else []
    if not owners:
        return False
    for pid in owners:
        try:
            if not container_cgroup(Path(f"/proc/{pid}/cgroup").read_text()):
                return False
        except OSError:
            return False
    return True


class _Handler(http.server.BaseHTTPRequestHandler):
    state: Path
    peer_allowed = staticmethod(peer_in_container)

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        # The target exactly as sent (http.server would fold a leading "//" into "/").
        parts = self.requestline.split(" ")
        raw = parts[1] if len(parts) == 3 else ""
        ping = _PING.fullmatch(raw)
        if ping:  # proves to the builder that this daemon holds the state dir's key; tells nothing
            self._send(200, _ping_answer(self.state, ping["nonce"]))
            return
        local = self.server.server_address
        assert isinstance(local, tuple)  # an AF_INET server's (host, port)
        if not self.peer_allowed(self.client_address[:2], local[:2]):
            self._send(403)
            return
        m = _PATH.fullmatch(raw)
        target = self.state / m["token"] / m["name"] if m else None
        if target is None or not target.is_file():
            self._send(404)
            return
        self._send(200, target.read_bytes())


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client that went away mid-answer is its own business


def make_server(state: Path, listen_port: int, peer_allowed=None) -> _Server:
    attrs: dict[str, object] = {"state": state}
    if peer_allowed is not None:  # tests of the path rules stand in for the container check
        attrs["peer_allowed"] = staticmethod(peer_allowed)
    return _Server(("127.0.0.1", listen_port), type("Handler", (_Handler,), attrs))


def _collect(state: Path) -> int:
    """Delete settings no build holds; return how many are still held."""
    held = 0
    for lock in state.glob("*.lock"):
        try:
            with open(lock, "a") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held += 1
                    continue
                shutil.rmtree(state / lock.stem, ignore_errors=True)
                lock.unlink(missing_ok=True)
        except FileNotFoundError:
            continue
    for d in state.iterdir():  # settings whose lock vanished
        if d.is_dir() and not (state / f"{d.name}.lock").exists():
            shutil.rmtree(d, ignore_errors=True)
    return held


def daemon(state: Path, listen_port: int) -> None:
    """Serve STATE on LISTEN_PORT (0: any free port); the port in use is recorded in
    STATE/port, so the same state directory keeps its URL from build to build."""
    server = make_server(state, listen_port)
    tmp = state / f".port.{os.getpid()}"
    tmp.write_text(str(server.server_address[1]))
    os.replace(tmp, state / "port")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    idle_since = None
    try:
        while True:
            time.sleep(1)
            if _collect(state):
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > 5:
                return
    finally:
        server.shutdown()
        server.server_close()


def _daemon_answers(state: Path, listen_port: int) -> bool | None:
    """True: our daemon (it knows the key); False: nothing listens; None: something else."""
    nonce = secrets.token_hex(16)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{listen_port}/.builder-settings/{nonce}", timeout=2) as r:
            return hmac.compare_digest(r.read(), _ping_answer(state, nonce)) or None
    except urllib.error.HTTPError:
        return None
    except OSError:
        return False


def derived_port(state: Path) -> int:
    """A port for this state directory (so users and cache dirs do not collide), below
    Linux's ephemeral range."""
    return 20000 + int(hashlib.sha256(str(state.resolve()).encode()).hexdigest(), 16) % 12000


def _recorded_port(state: Path) -> int | None:
    try:
        value = int((state / "port").read_text())
    except (OSError, ValueError):
        return None
    return value if 0 < value < 65536 else None


def _ensure_daemon(state: Path, fixed_port: int | None) -> int:
    """The port of this state directory's daemon, started when it is not running."""
    with open(state / _START_LOCK, "a") as start_lock:
        fcntl.flock(start_lock, fcntl.LOCK_EX)  # one builder starts it; the others wait and use it
        listen_port = fixed_port or _recorded_port(state) or derived_port(state)
        answer = _daemon_answers(state, listen_port)
        if answer is True:
            return listen_port
        if answer is None:
            if fixed_port:
                raise UserError(
                    f"port {listen_port} is taken by something else; set BUILDER_SETTINGS_PORT to a free port"
                )
            listen_port = 0  # someone else has ours: any free port, recorded for next time
        (state / "port").unlink(missing_ok=True)
        subprocess.Popen(
            [sys.executable, "-m", "builder.engine.settings_server", str(state), str(listen_port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(50):
            started = _recorded_port(state)
            if started and _daemon_answers(state, started):
                return started
            time.sleep(0.1)
    raise UserError(
        f"cannot serve build settings on 127.0.0.1:{listen_port or 'a free port'}; "
        "set BUILDER_SETTINGS_PORT to a free port"
    )


@contextmanager
def hold(settings: BuildSettings) -> Iterator[tuple[Path, str]]:
    """Publish SETTINGS in the state directory and hold them (a shared lock) while the
    block runs; yields (state directory, token)."""
    state = state_dir()
    name = token(state, settings.digest())
    lock_path = state / f"{name}.lock"
    while True:  # take the shared lock on a lock file the daemon has not just removed
        lock = open(lock_path, "a")
        fcntl.flock(lock, fcntl.LOCK_SH)
        if lock_path.exists() and os.fstat(lock.fileno()).st_ino == lock_path.stat().st_ino:
            break
        lock.close()
    try:
        target = state / name
        if not (target / "index").exists():
            tmp = state / f".{name}.{os.getpid()}"
            tmp.mkdir(mode=0o700)
            for file_name, data in settings.files().items():
                (tmp / file_name).write_bytes(data)
            try:
                os.rename(tmp, target)
            except OSError:  # another build wrote the same settings first
                shutil.rmtree(tmp, ignore_errors=True)
        yield state, name
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


@contextmanager
def serve_settings(settings: BuildSettings, listen_port: int | None = None) -> Iterator[str | None]:
    """Make the settings available while the block runs; yields their URL (None when empty)."""
    if not settings:
        yield None
        return
    settings.validate()
    with hold(settings) as (state, name):
        served_on = _ensure_daemon(state, listen_port or port())
        yield f"http://127.0.0.1:{served_on}/{name}"


if __name__ == "__main__":
    daemon(Path(sys.argv[1]), int(sys.argv[2]))
