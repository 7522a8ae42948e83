"""Errors the command line turns into one clear line and a non-zero exit."""
from __future__ import annotations

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
