"""The one reader of files the user names (CA bundles, credential files, patches, keys,
catalog files): what an option's path points at is read here, and only here.

A user's path may name anything: a directory, a fifo that never answers, /dev/zero, a
file far too big, bytes that are not text. The reader opens without blocking (a fifo
cannot hold it), reads only a regular file, reads at most the cap plus one byte, and
turns every failure into one line `WHAT PATH: REASON` that never shows the contents.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from builder.core.errors import UserError
from builder.core.terminal import escape

# Generous caps for the legitimate case, named in the error a bigger file gets.
MAX_CA_BUNDLE = 8 << 20  # the system bundle is ~200 KiB
MAX_CREDENTIALS = 64 << 10  # one line USER:PASSWORD
MAX_PATCH = 64 << 20
MAX_KEY = 1 << 20  # a cosign key is under 1 KiB

_SHOWN_MAX = 200  # characters of a path an error line shows


class UserFileError(UserError):
    """A user's file that cannot be had; REASON is the cause alone (no path, no contents),
    for callers that word the line themselves. MISSING: there is no such file."""

    def __init__(self, what: str, path: Path | str, reason: str, missing: bool = False) -> None:
        super().__init__(f"{what} {shown(path)}: {reason}")
        self.reason = reason
        self.missing = missing


def shown(path: Path | str) -> str:
    """PATH as one line of an error message: control characters escaped, cut when long."""
    text = escape(os.fsencode(path).decode("utf-8", "backslashreplace"))  # undecodable bytes: \xNN
    return text if len(text) <= _SHOWN_MAX else text[:_SHOWN_MAX] + "..."


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n >> 10} KiB"


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, as an error line says it ("a fifo")."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a fifo"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "a special file"


def _os_reason(exc: OSError) -> tuple[str, bool]:
    """(reason, missing) for an OSError of open or read."""
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file", True
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied", False
    if exc.errno == errno.EISDIR:
        return "is a directory, not a file", False
    return (exc.strerror or type(exc).__name__).lower(), False


def _open_regular(path: Path | str, what: str) -> int:
    """PATH opened for reading (links followed) when it is a regular file; else
    UserFileError naming WHAT and PATH."""
    try:
        # O_NONBLOCK: opening a fifo with no writer returns at once instead of waiting
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason, missing = _os_reason(exc) if isinstance(exc, OSError) else ("not a file name (NUL byte)", False)
        raise UserFileError(what, path, reason, missing) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = file_kind(mode)
            raise UserFileError(
                what, path, "is a directory, not a file" if kind == "a directory" else f"is {kind}, not a regular file"
            )
        os.set_blocking(fd, True)  # a regular file: plain reads
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_user_bytes(path: Path | str, what: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at PATH (links followed), at most MAX_BYTES; else
    UserFileError naming WHAT (the option, e.g. '--ca-bundle') and PATH."""
    fd = _open_regular(path, what)
    try:
        data = _read_at_most(fd, max_bytes + 1)
    except OSError as exc:
        raise UserFileError(what, path, _os_reason(exc)[0]) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UserFileError(what, path, f"larger than {_size(max_bytes)}, the limit for {what}")
    return data


def read_user_tail(path: Path | str, what: str, max_bytes: int) -> bytes:
    """The last MAX_BYTES of the regular file at PATH (all of it when smaller), for a log
    that may grow without bound; a non-regular file is one UserFileError, as above."""
    fd = _open_regular(path, what)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            os.lseek(fd, size - max_bytes, os.SEEK_SET)
        return _read_at_most(fd, max_bytes)
    except OSError as exc:
        raise UserFileError(what, path, _os_reason(exc)[0]) from None
    finally:
        os.close(fd)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_user_text(path: Path | str, what: str, max_bytes: int) -> str:
    """read_user_bytes() decoded as UTF-8 (one line naming WHAT and PATH when it is not)."""
    data = read_user_bytes(path, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserFileError(what, path, f"not UTF-8 text (byte {exc.start + 1})") from None
