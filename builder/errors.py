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
        Reported                     already reported in full (a summary): nothing more printed
      Interrupted         128+N      SIGINT/SIGTERM arrived; cleanup ran, no tag moved

The root is a BaseException, like KeyboardInterrupt: no library `except Exception` can
turn an interrupt into a retry, nor a user error into an "internal error"; only the CLI's
handler and explicit `except UserError` clauses catch them. cuda_arch.ArchError stays a
ValueError: that module also runs inside images, without the builder.
"""
from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path


class BuilderError(BaseException):
    """Root of every failure the builder reports; `report()` is what the CLI prints."""

    kind = "error"
    exit_code = 1

    def report(self) -> str:
        from builder.grammar import one_line

        return f"error: {one_line(str(self))}"  # a value quoted in the message cannot break the line


class UserError(BuilderError):
    """Bad input from the user: printed as one line, exit code 2, nothing changed."""

    kind = "user-error"
    exit_code = 2


class BuildFailure(BuilderError):
    """The work itself failed (engine, registry, checks of the result): exit code 1."""

    kind = "build-failure"
    exit_code = 1


class Reported(BuildFailure):
    """A failure already reported in full (e.g. the summary of `build --all`): the handler
    prints nothing more and exits 1."""

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
        return "\n".join(["error: invalid release catalog:", *(f"  {p}" for p in self.problems)])


class PatchError(UserError):
    """A patch that does not apply; `details` holds the rejected hunks."""

    def __init__(self, message: str, details: str):
        super().__init__(message)
        self.details = details

    def report(self) -> str:
        return "\n".join([super().report(), *(f"  {line}" for line in self.details.splitlines())])


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
        lines = [f"build failed: {self.message}"]
        if self.disk_full:
            lines.append("the engine ran out of disk space: free some (docker system prune, or remove old "
                         "images) and build again; no tag was moved")
        if self.step:
            lines.append(f"failing step: {self.step}")
        if self.tail:
            lines.append("last lines of its output:")
            lines += [f"  | {line}" for line in self.tail]
        if self.log_path:
            lines.append(f"full log: {self.log_path}")
        return "\n".join(lines)


class PushError(BuildFailure):
    """A push that failed; `transient` ones (connection resets, timeouts) are retried."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


# --- redaction ---------------------------------------------------------------------
# Every message, log line and exception text the builder writes goes through redact():
# the password part of any URL's userinfo (http://user:pass@host -> http://user:***@host,
# wherever the URL came from: our options, the Docker config's proxies, an engine error)
# and every secret the builder itself read (registered when read) become `***`.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s:@/?#]*):(?P<password>[^\s@/?#]*)@")
_SECRETS: set[str] = set()
MASK = "***"


def register_secret(value: str | None) -> None:
    """Remember a secret the builder read, so redact() hides it wherever it shows up."""
    if value and len(value) >= 3:  # shorter ones would mask ordinary text
        _SECRETS.add(value)


def say(message: str) -> None:
    """A message line on stderr, credentials redacted. Undecodable argv bytes come back as
    lone surrogates: shown escaped, never a crash."""
    import sys

    print(redact(message).encode("utf-8", "backslashreplace").decode("utf-8"), file=sys.stderr, flush=True)


def redact(text: str) -> str:
    """TEXT with URL passwords and every registered secret replaced by ***."""
    if not isinstance(text, str):
        text = str(text)
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
