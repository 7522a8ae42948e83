"""`builder cache ...`: the shared compile cache's commands (parsing and printing only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from builder import cache
from builder.cli.options import CACHE_DIR, JSON, with_cache_server
from builder.core.errors import UserError
from builder.core.terminal import say

cache_app = typer.Typer(help="The shared compile cache (nginx WebDAV) for ccache and bazel.", no_args_is_help=True)


@cache_app.command("serve")
@with_cache_server
def cache_serve(
    server=None,
    detach: bool = typer.Option(False, "--detach", "-d", help="Run in the background and return."),
) -> None:
    """Serve the compile cache; builds use it with --compile-cache URL (printed on stdout)."""
    url = cache.run_server(server(), detach=detach)
    if detach:
        print(url)


@cache_app.command("stats")
def cache_stats(directory: Optional[Path] = CACHE_DIR, as_json: bool = JSON) -> None:
    """Size of the cache and its hit rate."""
    s = cache.stats(cache.CacheServer.load(directory or cache.default_dir()))
    print(json.dumps(s, indent=2) if as_json else cache.stats_text(s))


@cache_app.command("stop")
def cache_stop(directory: Optional[Path] = CACHE_DIR) -> None:
    """Stop a detached cache server."""
    if not cache.stop(cache.CacheServer.load(directory or cache.default_dir())):
        raise UserError("no cache server is running for that directory")
    say("cache server stopped")
