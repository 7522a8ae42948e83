"""Every grammar a value must match before it reaches another language, defined once.

All patterns are used with `fullmatch` (`matches` below). None is anchored with `^...$`:
`re.match("^x$", "x\\n")` succeeds, because `$` also matches before a trailing newline,
and that newline is what would start a new Dockerfile instruction or shell command.
Patterns use explicit ASCII classes (`\\w` would accept any Unicode letter).

A value that passes its grammar is then written by the one function for its target
(builder/core/quoting.py), or, where the grammar leaves no character that target treats
specially (image references, versions, names), pasted after the grammar was re-checked.
"""

from __future__ import annotations

import re
from typing import Any

# Docker's image reference grammar is part of the image contract (builder/core/contract.py),
# defined there once; re-exported so every grammar can still be found through this module.
from builder.core.contract import (  # noqa: F401
    DIGEST,
    IMAGE_ID,
    NAME_TOTAL_LENGTH_MAX,
    REFERENCE,
    REGISTRY,
    REPOSITORY,
    SHA256_DIGEST,
    TAG,
    reference_problem,
    repository_problem,
    split_domain,
    tag_problem,
    tag_reference_problem,
)
from builder.core.errors import UserError

# --- names and versions of the builder's own vocabulary ---
# Release names become directory names (dockerfiles/RELEASE/), tags and log file names:
# no '/', no '..', nothing a shell or Dockerfile treats specially.
RELEASE = re.compile(r"(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
VARIANT = re.compile(r"(?!.*\.\.)[a-z0-9][a-z0-9.-]{0,63}")
BUILD_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
# Docker's label key recommendation: reverse-DNS, lower-case alphanumerics, '.' and '-',
# starting with a letter, no two separators in a row.
LABEL_KEY = re.compile(r"[a-z][a-z0-9]*(?:[.-][a-z0-9]+)*")
# PEP 440 public versions, as the catalog pins them.
VERSION_PATTERN = r"(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
VERSION = re.compile(VERSION_PATTERN)
# Toolkit and OS versions: "11.4.1", "22.04".
NUMERIC_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+){0,3}")
PYTHON_VERSION = re.compile(r"3\.[0-9]{1,2}")
OS_DISTRO = re.compile(r"[a-z][a-z0-9-]{0,31}")
DEBIAN_SUITE = re.compile(r"[a-z]{1,32}")
COMPONENT = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# A framework's display name ("TensorFlow"): it reaches comments, labels and READMEs.
FRAMEWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._+-]{0,63}")
# PyPI distribution names (PEP 508), exact pins, and requirements without markers.
PACKAGE_NAME_PATTERN = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
PACKAGE_NAME = re.compile(PACKAGE_NAME_PATTERN)
PIN = re.compile(rf"({PACKAGE_NAME_PATTERN})==({VERSION_PATTERN})")
_SPECIFIER = rf"(?:===?|~=|!=|<=?|>=?)\s*{VERSION_PATTERN}(?:\.\*)?"
REQUIREMENT = re.compile(rf"({PACKAGE_NAME_PATTERN})(?:\s*{_SPECIFIER}(?:\s*,\s*{_SPECIFIER})*)?")
# What `builder derive --pip` takes: name[extras] and comma-separated version clauses.
PIP_SPEC = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9,._-]+\])?"
    r"(?:[<>=!~]=?[A-Za-z0-9.*+!-]+(?:,[<>=!~]=?[A-Za-z0-9.*+!-]+)*)?"
)
# Debian package names (policy 5.6.1), optionally =VERSION.
# A Debian package version as dpkg states it ("2020.4.3.7~11.2.2-3+deb11u3"), epoch allowed.
DEBIAN_VERSION = re.compile(r"(?:[0-9]{1,9}:)?[0-9][A-Za-z0-9.+~-]{0,127}")
APT_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+(?:=[A-Za-z0-9][A-Za-z0-9.+:~-]*)?")
# A patch file name as it is copied into a build context and named in a RUN line.
FILE_NAME = re.compile(r"(?!\.\.?\Z)[A-Za-z0-9._+-]{1,255}")
# One flag per line of the nvbuildopts file (nvbuild.sh reads it with `read -r`).
NVBUILD_FLAG = re.compile(r"(?![\s#])[^\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]{1,255}(?<!\s)")

# Free text (env and label values, options): any Unicode scalar value except the C0
# controls (NUL, newline, CR, ESC ...), DEL, the C1 controls (U+0080-U+009F: NEL ends a
# line, CSI drives a terminal like ESC [) and the line and paragraph separators
# U+2028/U+2029; tab excepted. A Dockerfile ENV or LABEL value has no escape for a
# newline (a backslash-newline continues the line), an env file is one line per variable,
# a terminal obeys ESC and CSI; NUL cannot be in an environment at all. Lone surrogates
# (undecodable bytes from argv) cannot be written.
_CONTROLS = r"\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff"
TEXT = re.compile(rf"[^{_CONTROLS}]*")
# Catalog free text (env and label values, entrypoint and vendor texts, reasons) lands in
# the image's scripts and labels and is printed at every container start: no control at
# all (tab included: no catalog field is multi-line or tabulated), and no bidirectional
# override or isolate, which would make a banner show other text than it holds, and no
# other invisible format character (Unicode's Cf: zero-width spaces and joiners, the BOM,
# soft hyphen, tag characters), which would hide text in a label or a script.
_FORMAT = (
    r"\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_CATALOG_CONTROLS = _CONTROLS + r"\x09" + _FORMAT
CATALOG_TEXT = re.compile(rf"[^{_CATALOG_CONTROLS}]*")
ONE_LINE_TEXT = re.compile(rf"[^{_CATALOG_CONTROLS}]{{1,200}}")


def matches(pattern: re.Pattern[str], value: Any) -> bool:
    """True when VALUE is a str that PATTERN matches whole."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def printable(value: Any, limit: int = 60) -> str:
    """A value as an error message may show it: quoted, on one line (control characters
    and undecodable bytes escaped by repr), cut short (a catalog value may be huge)."""
    if not isinstance(value, str):
        text = repr(value)
        return text[:limit] + "..." if len(text) > limit else text
    return repr(value[:limit] + "..." if len(value) > limit else value)


def one_line(message: str) -> str:
    """An error message with every line break escaped, so it stays one line."""
    return message.replace("\r", "\\r").replace("\n", "\\n").replace("\x00", "\\x00")


# --- URLs the builder hands to builds (apt mirror, pip index, compile cache) ---
# Scheme, host, port and a path of unreserved and percent-encoded characters: no query,
# fragment, quote, `$`, backtick, space or newline (builder/core/urls.py checks and uses it).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9A-Fa-f:.]{{2,45}}\])"
_PCHAR = r"(?:[A-Za-z0-9._~+,=:!*-]|%[0-9A-Fa-f]{2})"
_USERINFO = rf"{_PCHAR}+:{_PCHAR}+@"
URL = re.compile(
    rf"(?P<scheme>https?)://(?P<userinfo>{_USERINFO})?(?P<host>{_HOST})(?::(?P<port>[0-9]{{1,5}}))?"
    rf"(?P<path>(?:/{_PCHAR}*)*)",
    re.ASCII,
)
URL_MAX = 2048

# --- sizes given to `builder cache serve` (512M, 2G, 1.5GiB) ---
SIZE = re.compile(r"(?P<number>[0-9]{1,12}(?:\.[0-9]{1,6})?)(?P<unit>[KkMmGgTt]?)(?:i?[Bb])?")


def check_ref(ref: str, what: str, image_id: bool = False, tag: bool = False) -> None:
    """REF must be an image reference by Docker's grammar (or, where allowed, an image id;
    with TAG, a name an image can be tagged: no digest)."""
    if image_id and IMAGE_ID.fullmatch(ref):
        return
    why = (tag_reference_problem if tag else reference_problem)(ref)
    if why:
        raise UserError(f"{what} {printable(ref)} {why}")


def canonical_name(name: str) -> str:
    """PEP 503 normalized distribution name: 'Typing_Extensions' -> 'typing-extensions'."""
    return re.sub(r"[-_.]+", "-", name).lower()
