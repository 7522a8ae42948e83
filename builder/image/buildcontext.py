"""Write a rendered build context to disk: the rendered text files plus the parts that
are copied as they are (nvbuild.sh, the compute-capability policy, the framework source).

The files are staged inside the destination and moved in at the end (outputdir.py), so
an error halfway leaves the previous context intact; files a render did not write are
never overwritten or deleted. The framework source is checked first: a symlink leaving
it, a hard link to a file outside it or a special file is refused before anything is
written or built; huge and sparse files are named with their size.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn

from builder.core import outputdir, paths
from builder.core.contract import InImage
from builder.core.errors import UserError
from builder.core.output import human_size
from builder.core.terminal import say

if TYPE_CHECKING:
    from builder.render import Rendered
    from builder.render.job import FilesContext

MARKER = outputdir.MARKER
# Build products of the framework source that never belong in a context.
IGNORED = shutil.ignore_patterns(
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.o",
    "*.so",
    ".tf_configure.bazelrc",
    ".git",
    "bazel-*",
    ".pytest_cache",
)
# A file this big in a source tree is a data set or a build product, not source: it is
# copied all the same (the tree is the user's), but named first.
HUGE_FILE_BYTES = 512 * 1024**2
# A file this big with less than half of it on disk is sparse: the copy writes every byte.
SPARSE_MIN_BYTES = 16 * 1024**2
# (st_dev, st_ino) of files already named: `build` checks the tree twice (before the
# engine, and when it writes the context), `bake` once per variant.
_named: set[tuple[int, int]] = set()


def check_source(framework_src: Path | None) -> Path:
    """The framework source a render or build copies (--framework-src, else the shipped
    one), checked by check_tree; `render` with or without -o and `build` use this one."""
    src = Path(framework_src) if framework_src else paths.framework_src_dir()
    if not os.path.lexists(src):
        raise UserError(f"framework source {src} does not exist")
    if not src.is_dir():
        raise UserError(f"framework source {src} is not a directory")
    check_tree(src)
    return src


def check_tree(src: Path, ignore=IGNORED) -> None:
    """Refuse, before anything is copied or built, a source tree holding a symlink that
    leaves it (absolute, or resolving outside it), a hard link to a file outside it or a
    special file (fifo, device, socket): copying any would put host files into the image
    or block. Huge and sparse files are named (a warning), once the tree is accepted."""
    root = Path(os.path.realpath(src))
    links: dict[tuple[int, int], list] = {}  # (dev, inode) -> [st_nlink, names in the tree, first path]
    big: list[tuple[str, os.stat_result]] = []
    for dirpath, dirnames, filenames in os.walk(src, onerror=_unreadable, followlinks=False):
        names = dirnames + filenames
        skipped = ignore(dirpath, names) if ignore else set()
        dirnames[:] = [d for d in dirnames if d not in skipped]
        for name in names:
            if name in skipped:
                continue
            path = os.path.join(dirpath, name)
            try:
                st = _check_entry(path, root)
            except OSError as exc:  # vanished or unreadable while the tree was walked
                _unreadable(exc, path)
            if stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1:
                    links.setdefault((st.st_dev, st.st_ino), [st.st_nlink, 0, path])[1] += 1
                if st.st_size > HUGE_FILE_BYTES or _sparse(st):
                    big.append((path, st))
    for nlink, inside, path in sorted(links.values(), key=lambda e: e[2]):
        if inside < nlink:  # another name of this file is outside the tree: a host file
            raise UserError(
                f"{path} is a hard link to a file outside the source tree "
                f"({nlink} links, {inside} in the tree); put a copy in its place if it belongs there"
            )
    for path, st in big:
        _name_big_file(path, st)


def _check_entry(path: str, root: Path) -> os.stat_result:
    """PATH's lstat, refusing a symlink leaving ROOT and a special file."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        real = Path(os.path.realpath(path))
        if os.path.isabs(target) or not (real == root or root in real.parents):
            raise UserError(f"{path} is a symlink leaving the source tree (-> {target})")
    elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise UserError(f"{path} is a special file (not a regular file, directory or symlink)")
    return st


def _unreadable(exc: OSError, path: str | None = None) -> NoReturn:
    """One line for a source file that vanished or cannot be read while it is checked or
    copied (something else is changing the tree, or its permissions keep the builder out)."""
    where = path or exc.filename
    if isinstance(exc, FileNotFoundError):
        raise UserError(
            f"{where} vanished while the framework source was read; run again when nothing is changing the tree"
        ) from None
    raise UserError(f"cannot read {where} in the framework source: {outputdir.oserror_text(exc)}") from None


def _sparse(st: os.stat_result) -> bool:
    return st.st_size >= SPARSE_MIN_BYTES and st.st_blocks * 512 < st.st_size // 2


def _name_big_file(path: str, st: os.stat_result) -> None:
    """One warning per file and process: the copy costs its full size in time and disk."""
    if (st.st_dev, st.st_ino) in _named:
        return
    _named.add((st.st_dev, st.st_ino))
    sparse = f" (sparse: {human_size(st.st_blocks * 512)} on disk)" if _sparse(st) else ""
    say(f"warning: {path} is {human_size(st.st_size)}{sparse}; it is copied into the build context in full")


def write(rendered: Rendered, dest: Path, framework_src: Path | None = None, root: Path | None = None) -> Path:
    """Write the full build context for `rendered` to `dest` and return it. ROOT: the
    output directory the user named, DEST or one above it (see outputdir.locked).

    Everything is staged first, so an error (a bad source tree, a full disk) leaves the
    previous context as it was; only files a render wrote are replaced or removed.
    """
    src = check_source(framework_src)
    for rel in rendered.files:
        outputdir.safe_relative(rel)
    return _write_tree(
        Path(dest),
        root,
        {"release": rendered.release, "variant": rendered.variant},
        lambda tmp: _stage(rendered, tmp, src),
    )


def write_files(context: FilesContext, dest: Path, root: Path | None = None, header: dict | None = None) -> Path:
    """Write a context of given texts and copied files (a base recipe's, a derived
    image's) to DEST, with the same bookkeeping and link rules as a rendered one."""
    for rel in (*context.texts, *context.copies):
        outputdir.safe_relative(rel)
    return _write_tree(Path(dest), root, header or {}, lambda tmp: _stage_files(context, tmp))


def _write_tree(dest: Path, root: Path | None, header: dict, stage: Callable[[Path], None]) -> Path:
    """The one way a context reaches disk: locked (no link followed below ROOT), staged,
    then moved in over what a render wrote there (never over the user's files)."""
    try:
        with outputdir.locked(dest, root) as at:
            previous = outputdir.owned_files(at, shown=dest)
            tmp = outputdir.staging_dir(at)
            try:
                stage(tmp)
                outputdir.install(at, tmp, previous, header, shown=dest)
            finally:
                outputdir.remove_tree(tmp)
    except OSError as exc:
        raise UserError(f"cannot write the build context to {dest}: {outputdir.oserror_text(exc)}") from None
    return dest


def _stage_files(context: FilesContext, tmp: Path) -> None:
    for rel, text in context.texts.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text, encoding="utf-8")
    for rel, source in context.copies.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, tmp / rel)
    for rel, data in context.blobs.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(data)


def _stage(rendered: Rendered, tmp: Path, src: Path) -> None:
    for rel, text in rendered.files.items():
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        if rel.endswith(".sh") or rel in ("with-build-settings", "register-gpu-wheels", "pip-constraints"):
            target.chmod(0o755)
    shutil.copy2(paths.nvbuild_script(), tmp / "nvbuild.sh")
    (tmp / "nvbuild.sh").chmod(0o755)
    for name in InImage.IN_IMAGE_MODULES:
        shutil.copy2(paths.in_image_module(name), tmp / name)
    try:
        shutil.copytree(src, tmp / "tensorflow-source", ignore=IGNORED, symlinks=True)  # checked by check_tree
    except shutil.Error as exc:  # the tree changed since check_tree: one line, the first file
        errors = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
        first = f"{errors[0][0]}: {errors[0][2]}" if errors and len(errors[0]) == 3 else str(exc)
        raise UserError(f"cannot copy the framework source {src}: {first}") from None
    (tmp / ".dockerignore").write_text("**/__pycache__\n**/*.pyc\n", encoding="utf-8")
