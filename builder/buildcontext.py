"""Write a rendered build context to disk: the rendered text files plus the parts that
are copied as they are (nvbuild.sh, the compute-capability policy, the framework source).

The directory is assembled next to its destination and swapped in at the end, so an
error halfway leaves the previous context intact; a directory that is not a previous
render is never overwritten.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from builder import paths
from builder.errors import UserError
from builder.render import Rendered

MARKER = ".builder-context"
# Build products of the framework source that never belong in a context.
IGNORED = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.o", "*.so",
                                 ".tf_configure.bazelrc", ".git", "bazel-*", ".pytest_cache")


def _check_destination(dest: Path) -> None:
    if dest.exists() and not dest.is_dir():
        raise UserError(f"output {dest} exists and is not a directory")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / MARKER).exists():
        raise UserError(f"output {dest} is not empty and was not written by `builder render`; "
                        "choose another directory")


def write(rendered: Rendered, dest: Path, framework_src: Path | None = None) -> Path:
    """Write the full build context for `rendered` to `dest` and return it."""
    dest = Path(dest)
    _check_destination(dest)
    src = Path(framework_src) if framework_src else paths.framework_src_dir()
    if not src.is_dir():
        raise UserError(f"framework source {src} is not a directory")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    tmp.chmod(0o755)  # mkdtemp makes it 0700
    try:
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
        shutil.copytree(src, tmp / "tensorflow-source", ignore=IGNORED, symlinks=True)
        (tmp / ".dockerignore").write_text("**/__pycache__\n**/*.pyc\n", encoding="utf-8")
        (tmp / MARKER).write_text(f"{rendered.release} {rendered.variant}\n", encoding="utf-8")
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.rename(dest, old)
            os.rename(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
