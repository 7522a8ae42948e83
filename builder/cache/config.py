"""The cache server's configuration: its options, each typed and checked before anything
is written, and the nginx.conf they make."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
import re
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from builder.cache.state import STATE_MAX, is_regular
from builder.core import paths
from builder.core.errors import UserError
from builder.core.grammar import SIZE
from builder.core.outputdir import write_new
from builder.core.urls import read_credentials
from builder.core.userfiles import read_user_text

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
    def checked(
        cls,
        directory: Path,
        port: int,
        listen: str,
        max_size: str,
        max_object_size: str,
        credentials_file: Path | None = None,
    ) -> CacheServer:
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
        return cls(
            check_directory(directory),
            port,
            listen,
            size,
            object_size,
            Path(credentials_file).absolute() if credentials_file else None,
        )

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

        write_new(
            "server.json",
            json.dumps(
                {
                    "port": self.port,
                    "listen": self.listen,
                    "max_size": self.max_size,
                    "max_object_size": self.max_object_size,
                    "credentials_file": str(self.credentials_file) if self.credentials_file else None,
                }
            ),
            state_fd,
        )

    @classmethod
    def load(cls, directory: Path) -> CacheServer:
        """The server as last started for this directory (defaults when never started)."""
        import json

        try:
            # in the user's directory: read as a user's file (a fifo planted there never blocks)
            saved = json.loads(read_user_text(Path(directory) / ".server" / "server.json", "cache state", STATE_MAX))
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
            writes = (
                f"            satisfy any;\n            limit_except GET HEAD {{\n{allow}"
                f'                deny all;\n                auth_basic "compile cache writes";\n'
                f"                auth_basic_user_file {q(self.htpasswd)};\n            }}\n"
            )
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
        if self.credentials_file is None and not is_regular(state_fd, source.name):
            write_new(source.name, f"{WRITE_USER}:{secrets.token_urlsafe(24)}\n", state_fd, 0o600)
        found = read_credentials(source, None, "--write")
        assert found is not None  # a file was given: it is read, or refused in one line
        user, password = found
        tmp = self.htpasswd.name + ".tmp"
        write_new(tmp, f"{user}:{ssha(password)}\n", state_fd, 0o600)
        os.replace(tmp, self.htpasswd.name, src_dir_fd=state_fd, dst_dir_fd=state_fd)
        return source
