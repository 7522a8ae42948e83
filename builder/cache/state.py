"""The cache server's state directory (D/.server): opened without following links, and
which process, if any, serves it."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from builder.core.errors import UserError
from builder.core.outputdir import DIR_FLAGS
from builder.core.userfiles import UserFileError, read_user_text, shown

if TYPE_CHECKING:  # the configuration reads its files through this module
    from builder.cache.config import CacheServer

STATE_MAX = 64 << 10  # the server's own small state files (server.json, serve.pid)
_NGINX_TEMP = ("body", "proxy", "fastcgi", "uwsgi", "scgi")  # nginx.conf's *_temp_path, under .server/tmp
_NGINX_FILES = ("nginx.pid", "error.log", "access.log")  # what nginx itself writes in .server


def _mode(dir_fd: int, name: str) -> int | None:
    """The type and mode of NAME inside DIR_FD, a link not followed; None when missing."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None


def is_regular(dir_fd: int, name: str) -> bool:
    mode = _mode(dir_fd, name)
    return mode is not None and stat.S_ISREG(mode)


def _subdir(parent_fd: int, name: str, where: Path) -> int:
    """The directory NAME inside PARENT_FD (created 0700 when missing), opened without
    following a link in its place: a link or a file there is refused in one line."""
    try:
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            pass
        return os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UserError(
                f"{shown(where)} is a symlink or not a directory; the cache server keeps its state "
                "only in a directory of its own: remove it"
            ) from None
        raise UserError(f"--dir: cannot create {shown(where)} ({exc.strerror})") from None


def open_state(server: CacheServer) -> int:
    """D/.server (0700) and its nginx temp directories, each opened without following a
    link; nginx's own files there that are not regular files (a planted link, a fifo) are
    removed first. The builder writes its state only through the descriptor returned, each
    file as a new one, so nothing planted in D is written through or waited on. D itself
    and D/data are the user's, as given (a link there is the user's choice)."""
    try:
        server.data.mkdir(parents=True, exist_ok=True)
        top = os.open(server.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(f"--dir {shown(server.directory)}: cannot create it ({exc.strerror})") from None
    try:
        state = _subdir(top, ".server", server.state)
    finally:
        os.close(top)
    try:
        os.fchmod(state, 0o700)
        tmp = _subdir(state, "tmp", server.state / "tmp")
        try:
            for name in _NGINX_TEMP:
                os.close(_subdir(tmp, name, server.state / "tmp" / name))
        finally:
            os.close(tmp)
        for name in _NGINX_FILES:
            if _mode(state, name) is not None and not is_regular(state, name):
                os.unlink(name, dir_fd=state)
    except OSError as exc:
        os.close(state)
        raise UserError(f"cannot prepare {shown(server.state)} ({exc.strerror})") from None
    except BaseException:
        os.close(state)
        raise
    return state


def recorded_pid(server: CacheServer) -> int | None:
    """The pid serve.pid names: None when there is no such file, 0 when it holds anything
    but a pid above 1 (-1 would signal every process, 0 the group, 1 init)."""
    try:
        text = read_user_text(server.state / "serve.pid", "cache state", STATE_MAX).strip()
    except UserFileError as exc:
        return None if exc.missing else 0
    return int(text) if re.fullmatch(r"[0-9]{1,9}", text) and int(text) > 1 else 0


def _children(pid: int) -> list[int]:
    """The processes whose parent is PID (from /proc/N/stat: the field after the comm)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read(4096).rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 1 and fields[1] == str(pid).encode():
            found.append(int(entry))
    return found


def _nginx_prefix(pid: int) -> str | None:
    """The -p directory of the nginx master PID, started as serve starts it
    (`nginx -c PREFIX/nginx.conf -p PREFIX`); None for any other process. The master
    shows its arguments joined by spaces after `nginx: master process `."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read(1 << 16).rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "surrogateescape")
    except OSError:
        return None
    text = text.removeprefix("nginx: master process ")
    if os.path.basename(text.split(" ", 1)[0]) != "nginx":
        return None
    for at in (i for i in range(len(text)) if text.startswith(" -p ", i)):
        prefix = text[at + 4 :]
        if text.endswith(f" -c {prefix}/nginx.conf -p {prefix}"):
            return prefix
    return None


def serves_here(pid: int, server: CacheServer) -> bool:
    """PID is this directory's `cache serve`: the parent of an nginx master whose prefix
    is this very state directory. A pid planted in serve.pid names no such process."""
    try:
        state = os.stat(server.state, follow_symlinks=False)
    except OSError:
        return False
    for child in _children(pid):
        prefix = _nginx_prefix(child)
        try:
            if prefix is not None and os.path.samestat(os.stat(prefix, follow_symlinks=False), state):
                return True
        except OSError:
            continue
    return False


def running_pid(server: CacheServer) -> int | None:
    pid = recorded_pid(server)
    return pid if pid and serves_here(pid, server) else None
