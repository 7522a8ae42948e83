"""Write a rendered build context to disk: the rendered text files plus the parts that
are copied as they are (nvbuild.sh, the compute-capability policy, the framework source).

The files are staged inside the destination and moved in at the end (outputdir.py), so
an error halfway leaves the previous context intact; files a render did not write are
never overwritten or deleted. The framework source is checked first: a symlink leaving
it or a special file is refused before anything is written or built.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from builder import outputdir, paths
from builder.errors import UserError
from builder.render import Rendered

MARKER = outputdir.MARKER
# Build products of the framework source that never belong in a context.
IGNORED = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.o", "*.so",
                                 ".tf_configure.bazelrc", ".git", "bazel-*", ".pytest_cache")


def check_tree(src: Path, ignore=IGNORED) -> None:
    """Refuse, before anything is copied or built, a source tree holding a symlink that
    leaves it (absolute, or resolving outside it) or a special file (fifo, device,
    socket): copying either would put host files into the image or block."""
    root = Path(os.path.realpath(src))
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        names = dirnames + filenames
        skipped = ignore(dirpath, names) if ignore else set()
        dirnames[:] = [d for d in dirnames if d not in skipped]
        for name in names:
            if name in skipped:
                continue
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                target = os.readlink(path)
                real = Path(os.path.realpath(path))
                if os.path.isabs(target) or not (real == root or root in real.parents):
                    raise UserError(f"{path} is a symlink leaving the source tree (-> {target})")
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise UserError(f"{path} is a special file (not a regular file, directory or symlink)")


def write(rendered: Rendered, dest: Path, framework_src: Path | None = None) -> Path:
    """Write the full build context for `rendered` to `dest` and return it.

    Everything is staged first, so an error (a bad source tree, a full disk) leaves the
    previous context as it was; only files a render wrote are replaced or removed.
    """
    dest = Path(dest)
    src = Path(framework_src) if framework_src else paths.framework_src_dir()
    if not src.is_dir():
        raise UserError(f"framework source {src} is not a directory")
    check_tree(src)
    for rel in rendered.files:
        outputdir.safe_relative(rel)
    try:
        with outputdir.locked(dest):
            previous = outputdir.owned_files(dest)
            tmp = outputdir.staging_dir(dest)
            try:
                _stage(rendered, tmp, src)
                outputdir.install(dest, tmp, previous, {"release": rendered.release, "variant": rendered.variant})
            finally:
                outputdir.remove_tree(tmp)
    except OSError as exc:
        raise UserError(f"cannot write the build context to {dest}: {outputdir.oserror_text(exc)}") from None
    return dest


def _stage(rendered: Rendered, tmp: Path, src: Path) -> None:
    for rel, text in rendered.files.items():
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        if rel.endswith(".sh") or rel in ("with-build-settings", "register-gpu-wheels"):
            target.chmod(0o755)
    shutil.copy2(paths.nvbuild_script(), tmp / "nvbuild.sh")
    (tmp / "nvbuild.sh").chmod(0o755)
    shutil.copy2(paths.cuda_arch_module(), tmp / "cuda_arch.py")
    shutil.copy2(paths.image_report_module(), tmp / "image_report.py")
    shutil.copytree(src, tmp / "tensorflow-source", ignore=IGNORED, symlinks=True)  # checked by check_tree
    (tmp / ".dockerignore").write_text("**/__pycache__\n**/*.pyc\n", encoding="utf-8")
