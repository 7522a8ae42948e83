"""Corporate build settings (apt mirror, pip index, extra CA bundle), served to one
build over loopback and fetched by the in-image `with-build-settings` wrapper.

Build args end up in image history and the legacy builder has no secret mounts, so the
settings travel this way instead: the build runs on the host network, the wrapper reads
them into /tmp for one RUN and deletes them. The URL is fixed (not a random port) so
that it never changes a layer's cache key.
"""
from __future__ import annotations

import http.server
import shutil
import socketserver
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from builder.errors import UserError

DEFAULT_PORT = 8741
# What this machine trusts; builds trust it too unless --no-host-ca.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


@dataclass(frozen=True)
class BuildSettings:
    apt_mirror: str | None = None
    pip_index: str | None = None
    ca_bundles: tuple[Path, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.apt_mirror or self.pip_index or self.ca_bundles)

    def validate(self) -> None:
        for url, what in ((self.apt_mirror, "--apt-mirror"), (self.pip_index, "--pip-index")):
            if url and not url.startswith(("http://", "https://")):
                raise UserError(f"{what} '{url}' is not an http:// or https:// URL")
        for path in self.ca_bundles:
            if not Path(path).is_file():
                raise UserError(f"--ca-bundle {path}: no such file")
            if b"BEGIN CERTIFICATE" not in Path(path).read_bytes():
                raise UserError(f"--ca-bundle {path}: not a PEM certificate bundle")

    def files(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        if self.apt_mirror:
            out["apt-mirror"] = self.apt_mirror.rstrip("/").encode()
        if self.pip_index:
            out["env"] = f"PIP_INDEX_URL='{self.pip_index}'\n".encode()
        if self.ca_bundles:
            out["ca.crt"] = b"\n".join(Path(p).read_bytes() for p in self.ca_bundles)
        out["index"] = ("\n".join(sorted(out)) + "\n").encode()
        return out


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextmanager
def serve(settings: BuildSettings, port: int = DEFAULT_PORT) -> Iterator[str | None]:
    """Serve the settings on 127.0.0.1:port while the block runs; yields the URL (None when empty)."""
    if not settings:
        yield None
        return
    settings.validate()
    directory = Path(tempfile.mkdtemp(prefix="build-settings-"))
    directory.chmod(0o700)
    try:
        for name, data in settings.files().items():
            (directory / name).write_bytes(data)
        handler = lambda *a, **kw: _Quiet(*a, directory=str(directory), **kw)  # noqa: E731
        try:
            server = _Server(("127.0.0.1", port), handler)
        except OSError as exc:
            raise UserError(f"cannot serve build settings on 127.0.0.1:{port} ({exc.strerror}); "
                            "is another build running? set BUILDER_SETTINGS_PORT") from None
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.shutdown()
            server.server_close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
