"""Bookkeeping of render output directories: render only ever deletes or overwrites what
a render wrote there.

A directory render writes holds a marker (JSON) listing every file it wrote. A re-render
stages the new files inside the directory, then removes the listed files the new render
no longer has, and moves the new ones in; a file or directory that is not listed (the
user's) is never deleted or overwritten: a name clash is refused before anything moves.
Renders into one directory serialize on an flock of the directory itself (no lock file).
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from builder.errors import UserError

MARKER = ".builder-context"
STAGING_PREFIX = ".builder-staging-"


def oserror_text(exc: OSError) -> str:
    return exc.strerror or str(exc)


@contextmanager
def locked(dest: Path) -> Iterator[Path]:
    """Hold an exclusive lock on DEST (created when missing) while writing into it. A
    DEST this call created is removed again when nothing was written into it."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise UserError(f"output {dest} exists and is not a directory")
    created = not dest.exists()
    try:
        dest.mkdir(parents=True, exist_ok=True)
        fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise UserError(f"cannot write to output {dest}: {oserror_text(exc)}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            print(f"waiting for another render writing {dest}", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield dest
        finally:
            if created:
                try:
                    dest.rmdir()  # only succeeds when it stayed empty
                except OSError:
                    pass
    finally:
        os.close(fd)


def safe_relative(rel: str) -> str:
    """A path inside the output directory: relative, no '..', no empty parts."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in rel:
        raise UserError(f"refusing to write '{rel}': not a plain path inside the output directory")
    return rel


def owned_files(dest: Path) -> set[str]:
    """The files a previous render wrote into DEST; refuses a non-empty DEST that no
    render wrote, or whose marker is from an older builder (it lists no files)."""
    marker = dest / MARKER
    entries = [p for p in dest.iterdir() if not p.name.startswith(STAGING_PREFIX)] if dest.is_dir() else []
    if not entries:
        return set()
    if not marker.is_file() or marker.is_symlink():
        raise UserError(f"output {dest} is not empty and was not written by `builder render`; "
                        "choose another directory")
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
        files = data["files"]
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise UserError(f"output {dest} was written by an older `builder render` that did not record its "
                        "files; remove it or choose another directory") from None
    return {safe_relative(f) for f in files}


def _files_under(root: Path) -> list[str]:
    """Files and symlinks under ROOT (links not followed), as sorted relative paths."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return sorted(out)


def _write_marker(dest: Path, files: set[str] | list[str], header: dict) -> None:
    tmp = dest / f"{MARKER}.tmp"
    tmp.write_text(json.dumps({**header, "files": sorted(files)}, indent=0) + "\n", encoding="utf-8")
    os.replace(tmp, dest / MARKER)


def _check_clashes(dest: Path, new: list[str], previous: set[str]) -> None:
    """Every place a new file goes is free or was a render's: checked before anything moves."""
    for rel in new:
        parts = rel.split("/")
        for i in range(1, len(parts)):  # parent directories must be real directories (no links out)
            parent = "/".join(parts[:i])
            p = dest / parent
            if os.path.lexists(p) and (p.is_symlink() or not p.is_dir()) and parent not in previous:
                raise UserError(f"{p} is in the way of the rendered {rel} and was not written by "
                                "`builder render`; move it or choose another directory")
        target = dest / rel
        if os.path.lexists(target) and rel not in previous:
            raise UserError(f"{target} exists and was not written by `builder render`; "
                            "move it or choose another directory")


def _remove_owned(dest: Path, rel: str) -> None:
    """Remove one file a render wrote, then its parents that this left empty (not DEST)."""
    path = dest / rel
    if path.is_symlink() or path.is_file():
        path.unlink()
    parent = path.parent
    while parent != dest:
        try:
            parent.rmdir()
        except OSError:
            break  # not empty: something else (perhaps the user's) is still there
        parent = parent.parent


def install(dest: Path, staging: Path, previous: set[str], header: dict) -> list[str]:
    """Move the staged files into DEST in place of the previous render's; return them."""
    new = _files_under(staging)
    for rel in new:
        safe_relative(rel)
    _check_clashes(dest, new, previous)
    # Until the end the marker covers both renders, so a crash halfway leaves nothing
    # of ours unlisted (and nothing of the user's listed).
    _write_marker(dest, previous | set(new), header)
    keep = set(new)
    for rel in sorted(previous - keep, reverse=True):
        _remove_owned(dest, rel)
    for rel in new:
        target = dest / rel
        if target.is_dir() and not target.is_symlink():
            raise UserError(f"{target} is a directory where the render puts a file; move it away")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / rel, target)
    _write_marker(dest, new, header)
    return new


def staging_dir(dest: Path) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=dest))
    tmp.chmod(0o755)  # mkdtemp makes it 0700
    return tmp


def write_atomic(path: Path, text: str) -> None:
    """Replace one file in one step (a concurrent reader sees the old or the new text)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
