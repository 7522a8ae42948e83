"""HTTP(S) URLs given to the builder (apt mirror, pip index, compile cache) and the
credentials that may go with them.

A URL is checked against one whole-string grammar (scheme, host, port, a path of
unreserved and percent-encoded characters; no query, fragment, quote, `$`, backtick,
space or newline) before it reaches a shell script, sed, apt or pip. Credentials never
come from the command line, where `ps` shows them to every user: a URL with a
USER:PASSWORD@ part on argv is refused, and credentials come from a file or an
environment variable instead (one line `USER:PASSWORD`), are percent-encoded into the
URL the build sees, and are registered for redaction.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path

from builder.core.errors import UserError
from builder.core.grammar import URL
from builder.core.grammar import URL_MAX as MAX_URL
from builder.core.redact import register_secret
from builder.core.userfiles import MAX_CREDENTIALS, UserFileError, read_user_text, shown

_CREDENTIALS = re.compile(r"(?P<user>[^:\x00-\x1f\x7f]+):(?P<password>[^\x00-\x1f\x7f]+)")


def has_userinfo(url: str) -> bool:
    """An '@' anywhere after the scheme: the URL grammar has none in a host, port or path,
    and a password may hold '/', '?' or '#' before it (a userinfo runs to the last '@')."""
    return "@" in (url.split("://", 1)[1] if "://" in url else url)


def check_url(url: str, what: str, credentials_hint: str) -> str:
    """URL, if it is a plain http(s) URL without credentials; else one line naming WHAT."""
    shown = url if len(url) <= 100 else url[:100] + "..."
    if has_userinfo(url):
        raise UserError(
            f"{what}: credentials in a URL on the command line are visible to every user (ps); {credentials_hint}"
        )
    m = URL.fullmatch(url) if len(url) <= MAX_URL else None
    if m is None:
        raise UserError(
            f"{what} {shown!r} is not an http:// or https:// URL (host, port and path only: "
            "no quotes, spaces, $, `, ?, # or control characters)"
        )
    if m["port"] and not 0 < int(m["port"]) < 65536:
        raise UserError(f"{what} {shown!r}: port {m['port']} is not a TCP port")
    return url


def read_credentials(file: Path | None, env: str | None, what: str) -> tuple[str, str] | None:
    """(user, password) from a file or an environment variable holding USER:PASSWORD."""
    if file is not None and env is not None:
        raise UserError(f"{what}-credentials-file and {what}-credentials-env exclude each other")
    if file is not None:
        source = f"{what}-credentials-file {shown(file)}"
        try:
            text = read_user_text(file, f"{what}-credentials-file", MAX_CREDENTIALS)
        except UserFileError as exc:  # never the contents: they may be the password
            raise UserError(f"{source}: cannot read: {exc.reason}") from None
        lines = text.splitlines()
        value = lines[0] if lines else ""
    elif env is not None:
        if env not in os.environ:
            raise UserError(f"{what}-credentials-env {env}: that variable is not set")
        source, value = f"{what}-credentials-env {env}", os.environ[env]
    else:
        return None
    m = _CREDENTIALS.fullmatch(value)
    if m is None:  # the value itself is never shown
        raise UserError(f"{source}: expected one line USER:PASSWORD (no control characters)")
    register_secret(m["password"])
    register_secret(urllib.parse.quote(m["password"], safe=""))
    return m["user"], m["password"]


def with_credentials(url: str, credentials: tuple[str, str] | None) -> str:
    """URL with USER:PASSWORD@ (percent-encoded, so the result still fits the grammar)."""
    if credentials is None:
        return url
    scheme, rest = url.split("://", 1)
    user, password = (urllib.parse.quote(c, safe="") for c in credentials)
    return f"{scheme}://{user}:{password}@{rest}"


def on_loopback(url: str | None) -> bool:
    """Is URL's host this machine's loopback (127.x, ::1, localhost)? A build reaches such a
    server only over the host's network; any other host it reaches over the default one,
    whose build steps share their cache keys with every other build's (bakes included:
    BuildKit keys a RUN by its network mode too)."""
    if not url:
        return False
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        import ipaddress

        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
