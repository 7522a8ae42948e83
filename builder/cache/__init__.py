"""The shared compile cache: an nginx WebDAV server (Debian's nginx) that ccache's HTTP
remote storage and bazel's --remote_cache both speak to. Builds reach it through the
host network; other build machines through --listen.

`run_server` (server.py) runs nginx in the foreground (or detached) and a janitor that keeps the stored
objects under --max-size, oldest first; `stats` (usage.py) reads the size on disk and the hit rate
from nginx's access log (a GET answered 200 is a hit, 404 a miss).
"""

from __future__ import annotations

from builder.cache.config import (
    DEFAULT_PORT,
    MAX_OBJECT,
    WRITE_USER,
    CacheServer,
    check_address,
    check_directory,
    default_dir,
    docker_bridge_subnet,
    is_loopback,
    nginx_string,
    parse_size,
)
from builder.cache.server import nginx_binary, prune, run_server, stop
from builder.cache.usage import stats, stats_text

__all__ = [
    "DEFAULT_PORT",
    "MAX_OBJECT",
    "WRITE_USER",
    "CacheServer",
    "check_address",
    "check_directory",
    "default_dir",
    "docker_bridge_subnet",
    "is_loopback",
    "nginx_string",
    "parse_size",
    "nginx_binary",
    "prune",
    "run_server",
    "stop",
    "stats",
    "stats_text",
]
