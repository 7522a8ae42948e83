"""`builder cache stats`: the size on disk and the hit rate from nginx's access log (a GET
answered 200 is a hit, 404 a miss)."""

from __future__ import annotations

from builder.cache.config import CacheServer
from builder.cache.state import running_pid
from builder.core.userfiles import UserFileError, read_user_tail

_LOG_TAIL = 64 << 20  # stats counts the last 64 MiB of the access log (a busy cache's log grows without bound)


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
        "running": running_pid(server) is not None,
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
    return "\n".join(
        [
            f"{s['directory']}: {'running at ' + s['url'] if s['running'] else 'not running'}",
            f"  {s['objects']} objects, {s['size_bytes'] / 1e6:.1f} MB",
            f"  {s['lookups']} lookups: {s['hits']} hits, {s['misses']} misses (hit rate {s['hit_rate']:.0%}); "
            f"{s['stores']} stores, {s['store_errors']} refused",
        ]
    )
