"""Corporate build settings (apt mirror, pip index, extra CA bundle), served to builds
over loopback and fetched by the in-image `with-build-settings` wrapper.

Build args end up in image history and the legacy builder has no secret mounts, so the
settings travel this way instead: the build runs on the host network, the wrapper reads
them into /tmp for one RUN and deletes them.

One small daemon serves every concurrent build on a fixed port; each distinct set of
settings lives under a path named by its hash, so the URL a build sees (and with it
every layer's cache key) is the same each time the same settings are used. A build
holds a shared lock on its settings while it runs; the daemon deletes settings nobody
holds (secrets included) and exits when it has none left.
"""
from __future__ import annotations

import fcntl
import hashlib
import http.server
import os
import shutil
import socketserver
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from builder.errors import UserError, redact

DEFAULT_PORT = 8741
MAGIC = b"tfbuilder-settings\n"
# What this machine trusts; builds trust it too unless --no-host-ca.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def port() -> int:
    return int(os.environ.get("BUILDER_SETTINGS_PORT", DEFAULT_PORT))


def state_dir() -> Path:
    from builder.build import cache_dir

    d = cache_dir() / "settings"
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o700)
    return d


@dataclass(frozen=True)
class BuildSettings:
    apt_mirror: str | None = None
    pip_index: str | None = None
    ca_bundles: tuple[Path, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.apt_mirror or self.pip_index or self.ca_bundles)

    def validate(self) -> None:
        from builder.urls import URL

        for url, what in ((self.apt_mirror, "--apt-mirror"), (self.pip_index, "--pip-index")):
            # Whole-string grammar (credentials, percent-encoded, allowed here: the command
            # line refuses them before they get this far).
            if url is not None and not URL.fullmatch(url):
                raise UserError(f"{what} {redact(url)[:100]!r} is not an http:// or https:// URL")
        for path in self.ca_bundles:
            if not Path(path).is_file():
                raise UserError(f"--ca-bundle {path}: no such file")
            if b"BEGIN CERTIFICATE" not in Path(path).read_bytes():
                raise UserError(f"--ca-bundle {path}: not a PEM certificate bundle")

    def files(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        # One value per file, one line each: the wrapper reads them with `read -r`, never
        # sources or evaluates them.
        if self.apt_mirror:
            out["apt-mirror"] = (self.apt_mirror.rstrip("/") + "\n").encode()
        if self.pip_index:
            out["pip-index"] = (self.pip_index + "\n").encode()
        if self.ca_bundles:
            out["ca.crt"] = b"\n".join(Path(p).read_bytes() for p in self.ca_bundles)
        out["index"] = ("\n".join(sorted(out)) + "\n").encode()
        return out

    def digest(self) -> str:
        h = hashlib.sha256()
        for name, data in sorted(self.files().items()):
            h.update(name.encode() + b"\0" + data + b"\0")
        return h.hexdigest()[:16]


# --- the daemon ----------------------------------------------------------------------


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/.builder-settings":
            self.send_response(200)
            self.send_header("Content-Length", str(len(MAGIC)))
            self.end_headers()
            self.wfile.write(MAGIC)
            return
        if self.path.rstrip("/").count("/") < 2:  # no listings of the settings tree
            self.send_error(404)
            return
        super().do_GET()


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


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
    handler = lambda *a, **kw: _Handler(*a, directory=str(state), **kw)  # noqa: E731
    server = _Server(("127.0.0.1", listen_port), handler)
    import threading

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


def _daemon_answers(listen_port: int) -> bool | None:
    """True: our daemon; False: nothing listens; None: something else owns the port."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{listen_port}/.builder-settings", timeout=2) as r:
            return r.read() == MAGIC
    except urllib.error.HTTPError:
        return None
    except OSError:
        return False


def _ensure_daemon(state: Path, listen_port: int) -> None:
    answer = _daemon_answers(listen_port)
    if answer is True:
        return
    if answer is None:
        raise UserError(f"port {listen_port} is taken by something else; set BUILDER_SETTINGS_PORT to a free port")
    subprocess.Popen([sys.executable, "-m", "builder.buildsettings", str(state), str(listen_port)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    for _ in range(50):
        if _daemon_answers(listen_port):
            return
        time.sleep(0.1)
    raise UserError(f"cannot serve build settings on 127.0.0.1:{listen_port}; set BUILDER_SETTINGS_PORT to a free port")


@contextmanager
def serve(settings: BuildSettings, listen_port: int | None = None) -> Iterator[str | None]:
    """Make the settings available while the block runs; yields their URL (None when empty)."""
    if not settings:
        yield None
        return
    settings.validate()
    listen_port = listen_port or port()
    state = state_dir()
    digest = settings.digest()
    lock_path = state / f"{digest}.lock"
    while True:  # take the shared lock on a lock file the daemon has not just removed
        lock = open(lock_path, "a")
        fcntl.flock(lock, fcntl.LOCK_SH)
        if lock_path.exists() and os.fstat(lock.fileno()).st_ino == lock_path.stat().st_ino:
            break
        lock.close()
    try:
        target = state / digest
        if not (target / "index").exists():
            tmp = state / f".{digest}.{os.getpid()}"
            tmp.mkdir(mode=0o700)
            for name, data in settings.files().items():
                (tmp / name).write_bytes(data)
            try:
                os.rename(tmp, target)
            except OSError:  # another build wrote the same settings first
                shutil.rmtree(tmp, ignore_errors=True)
        _ensure_daemon(state, listen_port)
        yield f"http://127.0.0.1:{listen_port}/{digest}"
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


if __name__ == "__main__":
    daemon(Path(sys.argv[1]), int(sys.argv[2]))
