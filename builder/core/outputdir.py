"""Bookkeeping of render output directories: render only ever deletes or overwrites what
a render wrote there.

A directory render writes holds a marker (JSON) listing every file it wrote. A re-render
stages the new files inside the directory, then removes the listed files the new render
no longer has, and moves the new ones in; a file or directory that is not listed (the
user's) is never deleted or overwritten: a name clash is refused before anything moves.
Renders into one directory serialize on an flock of the directory itself (no lock file).

The marker is a file in a directory the user owns, so what it names is trusted only
inside the directory: plain relative paths, reached one directory at a time with
O_NOFOLLOW (dir_fd walking). A symlink planted on the way is never followed: a removal
leaves it (and what it points to) alone and says so, a write through it is refused.

The same holds on the way to the directory: the user's -o is trusted as given, but each
directory the builder adds below it (`render --all`'s RELEASE/VARIANT, a bake's
base-RELEASE) is opened the same way by `locked`, and written through that open
directory, so no writer (render, render --all, bake) reaches outside the -o directory.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from builder.core import grammar
from builder.core.errors import UserError
from builder.core.terminal import say

MARKER = ".builder-context"
STAGING_PREFIX = ".builder-staging-"
# A directory inside the output, opened without following a symlink in its place.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# The marker is a page of JSON (a file list); a bigger one is not ours.
MAX_MARKER_BYTES = 16 * 1024 * 1024


def output_path(text: str) -> Path:
    """An -o value as given (the parser of the commands' -o options): an empty one would
    be the current directory (Path('') is '.'), which nobody means by it, so it is refused."""
    if not text:
        raise UserError("the output path is empty: give -o DIR (-o . for the current directory)")
    return Path(text)


def oserror_text(exc: OSError) -> str:
    return exc.strerror or str(exc)


@contextmanager
def locked(dest: Path, root: Path | None = None) -> Iterator[Path]:
    """Hold an exclusive lock on DEST (created when missing) while writing into it, and
    yield the path to write through. ROOT is the directory the user named (-o), DEST or
    one above it: it is trusted as given (a link there is the user's choice), but each
    directory the builder adds below it is opened with O_NOFOLLOW relative to the one
    above, so a link planted on the way is refused, never followed. The path yielded
    names the open directory itself (/proc/self/fd/N), so a link swapped in on the way
    later is not followed either. Directories this call created are removed again when
    nothing was written into them."""
    dest = Path(dest)
    top = dest if root is None else Path(root)
    parts = _parts_below(dest, top)
    fds: list[int] = []
    created: list[bool] = []
    try:
        try:
            _walk_down(top, parts, fds, created)
        except BaseException:
            _remove_created(top, parts, fds, created)
            raise
        _lock(fds[-1], dest)
        try:
            yield _through(fds[-1], dest)
        finally:
            _remove_created(top, parts, fds, created)
    finally:
        for fd in fds:
            os.close(fd)


def check_below(dest: Path, root: Path) -> None:
    """Refuse now, before anything is written, what `locked(DEST, ROOT)` would refuse on
    the way: a link or a file in place of a directory the builder adds below ROOT. A run
    writing several contexts checks them all first, so it stops before its first write."""
    parts = _parts_below(Path(dest), Path(root))
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return  # missing (created later) or not a directory: `locked` says which
    try:
        for i, name in enumerate(parts):
            step = _step(fd, name, Path(root), parts[: i + 1])
            if step is None:
                return  # missing below here: created by `locked`, nothing to follow
            os.close(fd)
            fd = step
    finally:
        os.close(fd)


def _parts_below(dest: Path, top: Path) -> list[str]:
    """DEST's names below TOP (ValueError: not below it, a caller's bug); a name from a
    catalog ('..') that would climb out is refused."""
    parts = list(dest.relative_to(top).parts)
    if parts:
        safe_relative("/".join(parts))
    return parts


def _step(fd: int, name: str, top: Path, parts: list[str]) -> int | None:
    """Open the directory NAME inside FD without following a link; None when missing.
    TOP/PARTS: where it is, for the refusal."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
    where = top.joinpath(*parts)
    if os.path.islink(where):
        raise UserError(
            f"{where} is a symlink; the builder writes below {top} only into directories, "
            "never through a link: remove it or choose another directory"
        )
    raise UserError(f"output {where} exists and is not a directory")


def _walk_down(top: Path, parts: list[str], fds: list[int], created: list[bool]) -> None:
    """Open TOP (as given; created when missing), then each of PARTS, one directory at a
    time with O_NOFOLLOW, creating the missing ones: fds[i] holds parts[:i]."""
    if os.path.lexists(top) and not top.is_dir():
        raise UserError(f"output {top} exists and is not a directory")
    created.append(not os.path.lexists(top))
    try:
        top.mkdir(parents=True, exist_ok=True)
        fds.append(os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for i, name in enumerate(parts):
            step = _step(fds[-1], name, top, parts[: i + 1])
            made = step is None
            if made:
                os.mkdir(name, dir_fd=fds[-1])
                step = os.open(name, DIR_FLAGS, dir_fd=fds[-1])
            assert step is not None  # _step found the directory or it was just made
            fds.append(step)
            created.append(made)
    except OSError as exc:
        raise UserError(f"cannot write to output {top.joinpath(*parts)}: {oserror_text(exc)}") from None


def _lock(fd: int, dest: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise
        print(f"waiting for another render writing {dest}", file=sys.stderr, flush=True)
        fcntl.flock(fd, fcntl.LOCK_EX)


def _through(fd: int, dest: Path) -> Path:
    """The open directory FD as a path that always names it; DEST (checked just now)
    where /proc is not mounted."""
    proc = Path(f"/proc/self/fd/{fd}")
    try:
        if os.path.samestat(os.stat(proc), os.fstat(fd)):
            return proc
    except OSError:
        pass
    return dest


def _remove_created(top: Path, parts: list[str], fds: list[int], created: list[bool]) -> None:
    """Remove the directories the walk created, deepest first, while they stayed empty."""
    for i in range(len(fds) - 1, -1, -1):
        if not created[i]:
            return
        try:
            if i:
                os.rmdir(parts[i - 1], dir_fd=fds[i - 1])
            else:
                top.rmdir()
        except OSError:
            return  # not empty: written into


def safe_relative(rel: str) -> str:
    """A path inside the output directory: relative, no '..', no empty parts."""
    if not _is_plain_relative(rel):
        raise UserError(f"refusing to write '{rel}': not a plain path inside the output directory")
    return rel


def owned_files(dest: Path, shown: Path | None = None) -> set[str]:
    """The files a previous render wrote into DEST; refuses a non-empty DEST that no
    render wrote, or whose marker is from an older builder (it lists no files), or whose
    marker names a path that is not plainly inside DEST. SHOWN: DEST as errors name it
    (the path the user knows, where DEST is the one `locked` yields)."""
    marker = dest / MARKER
    shown = dest if shown is None else shown
    entries = [p for p in dest.iterdir() if not p.name.startswith(STAGING_PREFIX)] if dest.is_dir() else []
    if not entries:
        return set()
    data = _read_marker(marker)
    if data is None:
        raise UserError(
            f"output {shown} is not empty and was not written by `builder render`; choose another directory"
        )
    try:
        files = json.loads(data)["files"]
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise UserError(
            f"output {shown} was written by an older `builder render` that did not record its "
            "files; remove it or choose another directory"
        ) from None
    for rel in files:
        if not _is_plain_relative(rel):
            raise UserError(
                f"the marker {shown / MARKER} names {grammar.printable(rel)}, not a plain path inside the "
                "directory; remove the directory or choose another"
            )
    return set(files)


def _read_marker(marker: Path) -> bytes | None:
    """The marker's bytes, or None when it is not a regular file (never read through a
    link, never blocking on a fifo)."""
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(MAX_MARKER_BYTES + 1)
    return b"" if len(data) > MAX_MARKER_BYTES else data  # too big: not JSON, refused as not ours


def _is_plain_relative(rel: str) -> bool:
    """Relative, no '..', '.' or empty parts, no NUL, a name the file system can take."""
    parts = rel.split("/")
    if rel.startswith("/") or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        return False
    try:
        os.fsencode(rel)
    except UnicodeEncodeError:  # a lone surrogate from JSON's \ud800: no file has that name
        return False
    return True


def _files_under(root: Path) -> list[str]:
    """Files and symlinks under ROOT (links not followed), as sorted relative paths."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return sorted(out)


def _write_marker(dest: Path, files: set[str] | list[str], header: dict) -> None:
    tmp = dest / f"{MARKER}.tmp"
    write_new(tmp, json.dumps({**header, "files": sorted(files)}, indent=0) + "\n")
    os.replace(tmp, dest / MARKER)


def open_new(path: Path | str, dir_fd: int | None = None, mode: int = 0o666) -> int:
    """PATH opened for writing as a new file: whatever was planted under that name (a
    symlink to a host file, a fifo) is removed, never written through nor waited on.
    DIR_FD: PATH is a name inside that open directory (one reached without links)."""
    try:
        os.unlink(path, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)


def write_new(path: Path | str, text: str, dir_fd: int | None = None, mode: int = 0o666) -> None:
    """Write PATH as a new file (see open_new): the one writer of a file in a directory
    someone else may have planted names in."""
    with os.fdopen(open_new(path, dir_fd, mode), "w", encoding="utf-8") as f:
        f.write(text)


def check_clashes(dest: Path, new: list[str], previous: set[str], shown: Path | None = None) -> None:
    """Every place a new file goes is free or was a render's: checked before anything moves
    (SHOWN: DEST as errors name it)."""
    shown = dest if shown is None else shown
    for rel in new:
        parts = rel.split("/")
        for i in range(1, len(parts)):  # parent directories must be real directories (no links out)
            parent = "/".join(parts[:i])
            p = dest / parent
            if os.path.lexists(p) and (p.is_symlink() or not p.is_dir()) and parent not in previous:
                raise UserError(
                    f"{shown / parent} is in the way of the rendered {rel} and was not written by "
                    "`builder render`; move it or choose another directory"
                )
        target = dest / rel
        if os.path.lexists(target) and rel not in previous:
            raise UserError(
                f"{shown / rel} exists and was not written by `builder render`; move it or choose another directory"
            )


class _Blocked(UserError):
    """A part of a path inside DEST is a symlink or not a directory (REL: that part);
    its callers turn it into a warning (removal) or a refusal naming the rendered file."""

    def __init__(self, rel: str):
        super().__init__(f"{rel} is a symlink or not a directory")
        self.rel = rel


@contextmanager
def _parent_dirs(dest: Path, rel: str, create: bool = False) -> Iterator[list[int]]:
    """Open DEST, then each directory on the way to REL's parent with O_NOFOLLOW relative
    to the one before: fds[i] holds parts[i]. Nothing outside DEST can be reached (a link
    on the way raises _Blocked instead of being followed). CREATE makes missing ones."""
    parts = rel.split("/")
    fds = [os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    try:
        for i, name in enumerate(parts[:-1]):
            try:
                fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, dir_fd=fds[-1])
                fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _Blocked("/".join(parts[: i + 1])) from None
                raise
        yield fds
    finally:
        for fd in fds:
            os.close(fd)


def _remove_owned(dest: Path, rel: str) -> str | None:
    """Remove one file a render wrote (a symlink itself, never its target), then its
    parents that this left empty (not DEST). Returns the part of REL that is a symlink
    or a file where the render had a directory: left alone, nothing removed through it."""
    parts = rel.split("/")
    try:
        with _parent_dirs(dest, rel) as fds:
            try:
                if not stat.S_ISDIR(os.stat(parts[-1], dir_fd=fds[-1], follow_symlinks=False).st_mode):
                    os.unlink(parts[-1], dir_fd=fds[-1])
            except FileNotFoundError:
                pass
            for i in range(len(fds) - 1, 0, -1):  # fds[i] is parts[i-1], inside fds[i-1]
                try:
                    os.rmdir(parts[i - 1], dir_fd=fds[i - 1])
                except OSError:
                    break  # not empty: something else (perhaps the user's) is still there
    except FileNotFoundError:
        return None  # already gone
    except _Blocked as blocked:
        return blocked.rel
    return None


def _move_in(dest: Path, staging: Path, rel: str, shown: Path) -> None:
    """Move one staged file to DEST/REL, creating its directories, never through a link."""
    parts = rel.split("/")
    try:
        with _parent_dirs(dest, rel, create=True) as fds:
            try:
                mode = os.stat(parts[-1], dir_fd=fds[-1], follow_symlinks=False).st_mode
            except FileNotFoundError:
                mode = 0
            if stat.S_ISDIR(mode):
                raise UserError(f"{shown / rel} is a directory where the render puts a file; move it away")
            os.replace(staging / rel, parts[-1], dst_dir_fd=fds[-1])
    except _Blocked as blocked:
        raise UserError(
            f"{shown / blocked.rel} is in the way of the rendered {rel} and was not written by "
            "`builder render`; move it or choose another directory"
        ) from None


def install(dest: Path, staging: Path, previous: set[str], header: dict, shown: Path | None = None) -> list[str]:
    """Move the staged files into DEST in place of the previous render's; return them.
    SHOWN: DEST as errors and warnings name it."""
    shown = dest if shown is None else shown
    new = _files_under(staging)
    for rel in new:
        safe_relative(rel)
    check_clashes(dest, new, previous, shown)
    # Until the end the marker covers both renders, so a crash halfway leaves nothing
    # of ours unlisted (and nothing of the user's listed).
    _write_marker(dest, previous | set(new), header)
    keep = set(new)
    blocked = set()
    for rel in sorted(previous - keep, reverse=True):
        where = _remove_owned(dest, rel)
        if where is not None:
            blocked.add(where)
    for where in sorted(blocked):  # the user's now: what is behind it stays (and is not listed)
        what = "a symlink" if os.path.islink(dest / where) else "not a directory"
        say(
            f"warning: {shown / where} is {what}, not a directory of the render; left alone, nothing removed through it"
        )
    for rel in new:
        _move_in(dest, staging, rel, shown)
    _write_marker(dest, new, header)
    return new


def claim(dest: Path, previous: set[str], header: dict) -> None:
    """Mark DEST (locked, its marker read as PREVIOUS) as a render's before writing below
    it, so a run stopped halfway leaves a directory the next run accepts."""
    _write_marker(dest, previous, header)


def install_texts(
    dest: Path, texts: dict[str, str], previous: set[str], header: dict, shown: Path | None = None
) -> list[str]:
    """`install` of files given as texts (REL -> text), staged in DEST (locked) first."""
    tmp = staging_dir(dest)
    try:
        for rel, text in texts.items():
            (tmp / safe_relative(rel)).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_text(text, encoding="utf-8")
        return install(dest, tmp, previous, header, shown)
    finally:
        remove_tree(tmp)


def staging_dir(dest: Path) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=dest))
    tmp.chmod(0o755)  # mkdtemp makes it 0700
    return tmp


def write_atomic(path: Path, text: str) -> None:
    """Replace one file in one step (a concurrent reader sees the old or the new text)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write_new(tmp, text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
