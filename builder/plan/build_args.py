"""--build-arg: a user's build arguments, checked one by one and against the Dockerfile
that will receive them; the builder's own arguments and Docker's proxy arguments."""

from __future__ import annotations

import re

from builder.core import grammar
from builder.core.errors import UserError
from builder.core.redact import register_secret, userinfo

# Docker's predefined build arguments: accepted by every Dockerfile and kept out of the
# image's history, so a proxy (and any credentials in its URL) does not stay in the image.
PROXY_ARGS = frozenset(
    n for name in ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY") for n in (name, name.lower())
)
# The build arguments the builder sets itself, and what sets each (a user's value would
# make the image disagree with what its plan and read-back expect).
BUILDER_ARGS = {
    "BASE_IMAGE": "--base",
    "BUILD_ID": "--build-id",
    "BUILD_REF": "the builder (the source tree's revision)",
    "BUILD_DATE": "the builder (when the build starts)",
    "COMPILE_CACHE": "--compile-cache",
    "BUILD_SETTINGS": "the build settings (--apt-mirror, --pip-index, --ca-bundle)",
    "DEVEL_IMAGE": "--runtime",
    "ROOTFS_IMAGE": "the offline base's recipe",
}
ARG_LINE = re.compile(r"^[ \t]*ARG[ \t]+(.*)$", re.M | re.I)


def parse_build_args(given: tuple[str, ...] | list[str], setters: dict[str, str] | None = None) -> dict[str, str]:
    """--build-arg NAME=VALUE, each checked; the builder's own arguments are refused, naming
    what sets each (SETTERS: a command's own names for them)."""
    setters = {**BUILDER_ARGS, **(setters or {})}
    out: dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--build-arg {grammar.printable(item)} is not NAME=VALUE")
        if not grammar.matches(grammar.ENV_NAME, name):
            raise UserError(
                f"--build-arg {grammar.printable(name)}: not a build argument name (letters, digits "
                "and '_', not starting with a digit)"
            )
        if not grammar.TEXT.fullmatch(value):
            raise UserError(f"--build-arg {name}: the value holds a control character (newline, CR, NUL, ...)")
        if name in setters:
            raise UserError(f"--build-arg {name}: set by {setters[name]}")
        if name in PROXY_ARGS:  # a proxy URL may carry credentials (a token alone, too): never printed
            for secret in proxy_credentials(value):
                register_secret(secret)
        out[name] = value
    return out


def proxy_credentials(url: str) -> tuple[str, ...]:
    """What a proxy URL's userinfo holds (USER:PASSWORD, or a token as the user name alone):
    all of it is redacted wherever it shows up (register_secret adds the percent-encoded,
    decoded and JSON forms). Parsed by structure (errors.userinfo: up to the last '@'
    before the host), not by urlsplit, which ends userinfo at '#', '/' or '?' and so
    showed the rest of such a password."""
    found = userinfo(url)
    return tuple(x for x in found if x) if found else ()


def declared_args(dockerfile: str) -> set[str]:
    """The names a Dockerfile's ARG lines declare (ARG NAME[=DEFAULT] ...)."""
    return {word.split("=", 1)[0] for line in ARG_LINE.findall(dockerfile) for word in line.split()}


def check_build_args(given: dict[str, str], dockerfile: str) -> None:
    """Each --build-arg is one the Dockerfile declares (and the builder does not set) or a proxy's."""
    accepted = (declared_args(dockerfile) - set(BUILDER_ARGS)) | PROXY_ARGS
    for name in given:
        if name not in accepted:
            raise UserError(
                f"--build-arg {name}: the Dockerfile declares no such build argument; accepted: "
                f"{', '.join(sorted(accepted, key=lambda n: (n.lower(), n)))}"
            )
