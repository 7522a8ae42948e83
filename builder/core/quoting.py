"""One writer per target language, and the Jinja2 filters that apply them.

Each function first checks the value against what its target can hold (builder/core/grammar.py)
and raises QuotingError when it cannot: a value is written so that the target reads back
exactly that value, or not at all. Templates never paste a catalog value or an option:
free text goes through `dq` (Dockerfile string) or `sh` (shell word); values with a
grammar that leaves no special character (image references, names, versions) go through
the filter that re-checks that grammar and writes them unchanged.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any, Callable

from builder.core import contract, grammar
from builder.core.errors import UserError


class QuotingError(UserError):
    """A value that its target cannot hold (a newline in a Dockerfile value, NUL in an env)."""


def _text(value: Any, what: str) -> str:
    text = str(value)
    if not grammar.TEXT.fullmatch(text):
        bad = next(c for c in text if not grammar.TEXT.fullmatch(c))
        raise QuotingError(
            f"{what} {grammar.printable(text)} holds {ascii(bad)}: control characters "
            "(newline, CR, NUL, ESC ...) and undecodable bytes cannot be written there"
        )
    return text


def dockerfile_string(value: Any) -> str:
    """A double-quoted Dockerfile word for ENV, LABEL and ARG values. Inside double quotes
    Docker's word lexer honours exactly three escapes: \\\\, \\" and \\$ (ENV and LABEL
    expand $VARS). There is none for a newline: a backslash at the end of a line continues
    the instruction, so newline and CR are refused, like NUL and the other C0 controls."""
    text = _text(value, "Dockerfile value")
    return '"' + re.sub(r'([\\"$])', r"\\\1", text) + '"'


def shell_word(value: Any) -> str:
    """One POSIX shell word (single-quoted when needed). Used in RUN lines and in the
    entrypoint scripts, which are one line per command: no line breaks, no NUL."""
    return shlex.quote(_text(value, "shell word"))


def env_file_line(name: str, value: Any) -> str:
    """NAME=VALUE as `docker run --env-file` reads it: the rest of the line, verbatim."""
    if not grammar.ENV_NAME.fullmatch(name):
        raise QuotingError(f"{grammar.printable(name)} is not an environment variable name")
    return f"{name}={_text(value, f'env value of {name}')}\n"


def json_string(value: Any) -> str:
    """A JSON string (ASCII only, so no byte of it can end a line or a Dockerfile word)."""
    return json.dumps(str(value), ensure_ascii=True)


def comment_text(value: Any) -> str:
    """Text inside a '#' comment line of a Dockerfile or script: one line, no controls."""
    return _text(value, "comment text")


def checked(pattern: re.Pattern[str], what: str) -> Callable[[Any], str]:
    """A filter that writes a value unchanged after checking its grammar (the grammar
    admits no character any of our targets treats specially)."""

    def check(value: Any) -> str:
        text = str(value)
        if not pattern.fullmatch(text):
            raise QuotingError(f"{grammar.printable(text)} is not {what}")
        return text

    return check


def image_ref(value: Any) -> str:
    text = str(value)
    if contract.IMAGE_ID.fullmatch(text) or contract.reference_problem(text) is None:
        return text
    raise QuotingError(f"{grammar.printable(text)} is not an image reference NAME[:TAG][@DIGEST]")


FILTERS: dict[str, Callable[..., str]] = {
    "dq": dockerfile_string,
    "sh": shell_word,
    "json": json_string,
    "comment": comment_text,
    "ref": image_ref,
    "env_name": checked(grammar.ENV_NAME, "an environment variable name"),
    "label_key": checked(grammar.LABEL_KEY, "a label key (reverse-DNS: lower-case letters, digits, '.', '-')"),
    "version": checked(grammar.NUMERIC_VERSION, "a version such as 11.8"),
    "pyversion": checked(grammar.PYTHON_VERSION, "a Python version such as 3.9"),
    "apt": checked(grammar.APT_NAME, "a Debian package name"),
    "suite": checked(grammar.DEBIAN_SUITE, "a Debian suite name"),
    "flag": checked(grammar.NVBUILD_FLAG, "a build flag (one line, no leading '#')"),
}
