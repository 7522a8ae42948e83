"""Errors the command line turns into one clear line and a non-zero exit."""
from __future__ import annotations

import re
from dataclasses import dataclass


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code 2, nothing changed."""

    exit_code = 2


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
        return "\n".join(str(p) for p in self.problems)


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


def redact(text: str) -> str:
    """TEXT with URL passwords and every registered secret replaced by ***."""
    if not isinstance(text, str):
        text = str(text)
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
