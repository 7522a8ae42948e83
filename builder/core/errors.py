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

Every report is made of escaped lines (terminal.lines()) and printed by terminal.say();
redact.py hides secrets in whatever is printed; import their names from there.

The root is a BaseException, like KeyboardInterrupt, and the whole family with it: the
CLI's one handler catches BuilderError; every `except Exception` in the builder and the
libraries it calls lets the family through. Code relies on that: a clean-up or a
best-effort read that swallows an engine's or a library's failure (`except Exception`)
must not swallow an interrupt, nor turn a user error (the engine's CannotStart, a refused
registry answer) into a different message or a retry. cuda_arch.ArchError stays a
ValueError: that module also runs inside images, without the builder.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path

from builder.core.terminal import lines
from builder.core.terminal import terminal_line as terminal_line


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
            shown.append(
                "the engine ran out of disk space: free some (docker system prune, or remove old "
                "images) and build again; no tag was moved"
            )
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
