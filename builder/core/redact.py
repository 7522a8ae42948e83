"""The secret registry and redact(): every message, log line and exception text the builder
writes goes through redact(), which hides every secret the builder itself read and the
password part of any URL's userinfo."""

from __future__ import annotations

import json
import re
from urllib.parse import quote, unquote

# What redact() replaces by `***`: every secret the builder itself read (registered when
# read, in every form it may be written in), then the password part of any URL's userinfo
# (http://user:pass@host -> http://user:***@host, wherever the URL came from: our options,
# the Docker config's proxies, an engine error). Userinfo is found by structure, not by a
# pattern of the characters it may hold: everything between `://` and the last '@' that
# a host follows, split at the first ':' (as curl reads a proxy URL), so no character
# ('#', '/', '?', '@' ...) in a password hides it.
# A URL as text shows it: a scheme, then everything up to whitespace or a double quote
# that no backslash escapes (the end of a JSON string). The scheme's length is bounded so
# that the search stays linear in the text.
_URL = re.compile(r'[A-Za-z][A-Za-z0-9+.-]{0,31}://(?:[^\s"\\]|\\\S)*')
# What follows userinfo's '@': a host (name, or [IPv6]) and maybe a port, then no more
# host characters, after a ':' either (an image digest, `@sha256:...`, is no host; the
# end of "dial http://u:p@proxy:3128: refused" is).
_HOST = re.compile(r"(?:[A-Za-z0-9._~%-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?(?!:?[A-Za-z0-9._~%@\[-])")
_SECRETS: set[str] = set()
MASK = "***"


def register_secret(value: str | None) -> None:
    """Remember a secret the builder read, so redact() hides it wherever it shows up: as it
    is, percent-encoded or decoded (in a URL), and escaped as in a JSON string."""
    for form in secret_forms(value or ""):
        if len(form) >= 3:  # shorter ones would mask ordinary text
            _SECRETS.add(form)


def secret_forms(value: str) -> set[str]:
    """VALUE in every form a message, a URL or a JSON line may show it in."""
    forms = {value, quote(value, safe="", errors="surrogatepass"), unquote(value)}  # argv may hold lone surrogates
    return forms | {json.dumps(f, ensure_ascii=ascii_only)[1:-1] for f in forms for ascii_only in (True, False)}


def userinfo_end(rest: str) -> int | None:
    """Where the userinfo of REST (a URL after its `scheme://`) ends: the last '@' that a
    host follows; None when there is none."""
    at = len(rest)
    while True:
        at = rest.rfind("@", 0, at)
        if at < 0:
            return None
        if _HOST.match(rest, at + 1):
            return at


def userinfo(url: str) -> tuple[str, str] | None:
    """(USER, PASSWORD) of URL's userinfo ('' when the userinfo is a token alone), with or
    without a scheme; None when it has none. By structure: everything up to the last '@'
    before the host (else the last '@' at all: a value we read is hidden whole rather than
    shown), split at the first ':'."""
    rest = url.split("://", 1)[1] if "://" in url else url
    at = userinfo_end(rest)
    if at is None:
        at = rest.rfind("@")
    if at < 0:
        return None
    user, _, password = rest[:at].partition(":")
    return user, password


def _mask_userinfo(url: str) -> str:
    """URL (scheme:// and the rest of its word) with its userinfo's password masked."""
    start = url.index("://") + 3
    rest = url[start:]
    at = userinfo_end(rest)
    if at is None:  # an empty host after the last '@' (`u:p#/?x@y@/path`): hidden up to it
        at = rest.rfind("@")
        if at < 0 or rest[at + 1 : at + 2] not in ("", "/"):  # `name@sha256:...` is a digest
            return url
    user, sep, _ = rest[:at].partition(":")
    if not sep or "/" in user:  # a token alone is a registered secret's; a '/' before ':' is a path
        return url
    return f"{url[:start]}{user}:{MASK}{rest[at:]}"


# USER:PASSWORD@HOST without a scheme (an image reference or a registry given with
# credentials in it): a word whose first ':' comes before an '@' that a host follows.
# Bounded lengths keep the search linear in a long log line.
_BARE = re.compile(r"""(?<![^\s'"(=,])[^\s'"/:@]{1,256}:[^\s'"]{0,4096}@[^\s'"]{0,4096}""")


def _mask_bare(word: str) -> str:
    if "://" in word:  # a URL: _URL's
        return word
    at = userinfo_end(word)
    user = word.partition(":")[0]
    return word if at is None else f"{user}:{MASK}{word[at:]}"


def redact(text: str) -> str:
    """TEXT with URL passwords and every registered secret replaced by ***."""
    if not isinstance(text, str):
        text = str(text)
    for secret in sorted(_SECRETS, key=len, reverse=True):  # first: a password may hold '@'
        text = text.replace(secret, MASK)
    if "://" in text:
        text = _URL.sub(lambda m: _mask_userinfo(m[0]), text)
    return _BARE.sub(lambda m: _mask_bare(m[0]), text) if "@" in text else text
