"""The builder's one error family. Every failure it reports is a BuilderError of one of
three kinds, each with its exit code; the CLI's one handler prints `report()` and exits.

    BuilderError                     root
      UserError           exit 2     bad input; nothing was changed
        CatalogError                 every catalog problem, reported together
        PatchError                   a patch that does not apply (with its rejected hunks)
        QuotingError (quoting.py)    a value that cannot be written for its target
      BuildFailure        exit 1     the engine, a registry or a check failed the work
        BuildError                   a failed image build (exit 2 when the disk is full)
        PushError                    a failed push (transient ones are retried)
        Unverified        exit 3     pushed (the engine says so), but not read back from the registry
        Reported                     already reported in full (a summary): nothing more printed
      Interrupted         128+N      SIGINT/SIGTERM arrived; cleanup ran, no tag moved

Every report is made of escaped lines (`lines()`, `escape()` below) and printed by `say()`:
no path, key or value a message quotes can break its line or reach the terminal as a
control character.

The root is a BaseException, like KeyboardInterrupt: no library `except Exception` can
turn an interrupt into a retry, nor a user error into an "internal error"; only the CLI's
handler and explicit `except UserError` clauses catch them. cuda_arch.ArchError stays a
ValueError: that module also runs inside images, without the builder.
"""
from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote


class BuilderError(BaseException):
    """Root of every failure the builder reports; `report()` is what the CLI prints."""

    kind = "error"
    exit_code = 1

    def report(self) -> str:
        return lines(f"error: {self}")  # a value quoted in the message cannot break the line


class UserError(BuilderError):
    """Bad input from the user: printed as one line, exit code 2, nothing changed."""

    kind = "user-error"
    exit_code = 2


class BuildFailure(BuilderError):
    """The work itself failed (engine, registry, checks of the result): exit code 1."""

    kind = "build-failure"
    exit_code = 1


class Unverified(BuildFailure):
    """The engine pushed the image and the registry took it, but reading it back failed:
    the image is published (the message names it with the engine's digest), unverified.
    Exit code 3, so a CI job can tell a live image from a failed push."""

    exit_code = 3


class Reported(BuildFailure):
    """A failure already reported in full (e.g. the summary of `build --all`): the handler
    prints nothing more and exits 1 (or EXIT_CODE: 3 when what was reported were
    published but unverified pushes)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code

    def report(self) -> str:
        return ""


class Interrupted(BuilderError):
    """SIGINT or SIGTERM arrived; exit code 130 or 143 as shells report them."""

    kind = "interrupted"

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(signal.Signals(signum).name)

    def report(self) -> str:
        return f"interrupted ({self}); no tag was moved"


@dataclass(frozen=True)
class Problem:
    """One catalog problem, located by file and dotted key path."""

    file: str
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.key}" if self.key else self.file
        return f"{where}: {self.message}"


class CatalogError(UserError):
    """Every problem found while loading the catalog, reported together."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        first = str(problems[0]) if problems else "invalid catalog"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(first + more)

    def report(self) -> str:
        return lines("error: invalid release catalog:", *(f"  {p}" for p in self.problems))


class PatchError(UserError):
    """A patch that does not apply; `details` holds the rejected hunks."""

    def __init__(self, message: str, details: str):
        super().__init__(message)
        self.details = details

    def report(self) -> str:
        # the hunks keep their own lines (split on newlines only); each is escaped
        hunks = self.details.split("\n") if self.details else []
        return lines(f"error: {self}", *(f"  {line}" for line in hunks))


# How a full disk shows up: the kernel's ENOSPC, apt's own check, quotas.
DISK_FULL = re.compile(r"no space left on device|enough free space|disk quota exceeded", re.IGNORECASE)


class BuildError(BuildFailure):
    """A build that failed in the engine: the failing step and the last lines of output."""

    def __init__(self, message: str, step: str = "", tail: list[str] | None = None, log_path: Path | None = None):
        self.message, self.step, self.tail, self.log_path = message, step, tail or [], log_path
        super().__init__(message)

    @property
    def disk_full(self) -> bool:
        return any(DISK_FULL.search(text) for text in [self.message, *self.tail])

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return 2 if self.disk_full else 1  # a full disk is the user's to fix

    def report(self) -> str:
        shown = [f"build failed: {self.message}"]
        if self.disk_full:
            shown.append("the engine ran out of disk space: free some (docker system prune, or remove old "
                         "images) and build again; no tag was moved")
        if self.step:
            shown.append(f"failing step: {self.step}")
        if self.tail:
            shown.append("last lines of its output:")
            shown += [f"  | {line}" for line in self.tail]
        if self.log_path:
            shown.append(f"full log: {self.log_path}")
        return lines(*shown)


class PushError(BuildFailure):
    """A push that failed; `transient` ones (connection resets, timeouts) are retried."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


# --- redaction ---------------------------------------------------------------------
# Every message, log line and exception text the builder writes goes through redact():
# every secret the builder itself read (registered when read, in every form it may be
# written in), then the password part of any URL's userinfo (http://user:pass@host ->
# http://user:***@host, wherever the URL came from: our options, the Docker config's
# proxies, an engine error) become `***`. Userinfo is found by structure, not by a
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
        if at < 0 or rest[at + 1:at + 2] not in ("", "/"):  # `name@sha256:...` is a digest
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


def say(message: str) -> None:
    """A message on stderr, credentials redacted; the one printer of messages and errors.
    An error (`error: ...`) is one line unless it is a report made of lines(): every
    newline in it is escaped too. Other messages keep their newlines as line breaks. Every
    other control character is escaped (escape()): no value a message quotes can drive the
    terminal, and undecodable argv bytes never crash it."""
    import sys

    text = redact(message)
    one_line = text.startswith("error: ") and not isinstance(message, Lines)
    shown = escape(text) if one_line else escape_block(text)
    quoting = isinstance(message, Lines) or text.startswith(("error: ", "warning: "))
    print(cut_block(shown, quoting), file=sys.stderr, flush=True)


# --- escaping ------------------------------------------------------------------------
# Every path, key and value a message shows reaches the terminal through escape(): each
# character Python would not print as itself (C0 and C1 controls, DEL, line and paragraph
# separators, lone surrogates from undecodable bytes, invisible format characters) becomes
# its escape, as repr writes it (\n, \x1b, \udcff). A report is built from lines() of
# escaped lines, so a message spans exactly the lines its report gives it.

def escape(text: str) -> str:
    """TEXT on one line with no control character: each unprintable character escaped."""
    text = text if isinstance(text, str) else str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def escape_block(text: str) -> str:
    """TEXT with its newlines kept as line breaks and every other control escaped."""
    return "\n".join(escape(line) for line in text.split("\n"))


# --- cutting ---------------------------------------------------------------------------
# A value an error quotes may be huge (a 10 kB option, a catalog string): the terminal
# gets its start and its length, and no line runs on for ever. Cut after redaction and
# escaping, so no cut can split a secret out of its mask or a control out of its escape.
WORD_MAX = 200    # a longer word (a quoted value) shows its first WORD_SHOWN characters
WORD_SHOWN = 80
LINE_MAX = 1000   # a longer line keeps its start and its end (where the "why" usually is)
_LONG_WORD = re.compile(r"(?<!\S)\S{%d,}" % (WORD_MAX + 1))


def cut(line: str, words: bool = True) -> str:
    """LINE with each word over WORD_MAX characters (WORDS) cut to its start and its
    length, and the line itself bounded by LINE_MAX."""
    if words and len(line) > WORD_MAX:
        line = _LONG_WORD.sub(lambda m: f"{m[0][:WORD_SHOWN]}... ({len(m[0])} characters)", line)
    if len(line) > LINE_MAX:
        head, tail = LINE_MAX * 7 // 10, LINE_MAX // 5
        line = f"{line[:head]} ... ({len(line) - head - tail} characters left out) ... {line[-tail:]}"
    return line


def cut_block(text: str, words: bool = True) -> str:
    return "\n".join(cut(line, words) for line in text.split("\n"))


def terminal_line(text: str) -> str:
    """TEXT as one line for the terminal: redacted, escaped and cut (doctor's report)."""
    return cut(escape(redact(text)))


class Lines(str):
    """A report made of escaped lines: its newlines are its own."""


def lines(*shown: str) -> Lines:
    """A report of these lines, each escaped: a newline inside one cannot start another."""
    return Lines("\n".join(escape(line) for line in shown))


def redact(text: str) -> str:
    """TEXT with URL passwords and every registered secret replaced by ***."""
    if not isinstance(text, str):
        text = str(text)
    for secret in sorted(_SECRETS, key=len, reverse=True):  # first: a password may hold '@'
        text = text.replace(secret, MASK)
    if "://" in text:
        text = _URL.sub(lambda m: _mask_userinfo(m[0]), text)
    return _BARE.sub(lambda m: _mask_bare(m[0]), text) if "@" in text else text
