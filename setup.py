"""Ships the checkout's non-Python parts with the package (pyproject.toml holds the rest).

templates/, framework-src/ and nvbuild.sh stay at the top of the checkout (the fixed
layout); a wheel carries copies of them under builder/_data/, modes kept (nvbuild.sh and
the in-image scripts are executables), and builder/_data/BUILD_COMMIT: the commit the wheel
was built from, as `git describe --always --dirty --abbrev=12` says it (provenance.source_ref
says a checkout's the same way). An sdist carries the same files at its top, BUILD_COMMIT
included, so a wheel built from it (`python -m build`) knows its commit without git.
An editable install (`pip install -e .`) copies nothing: it runs from the checkout.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
SHIPPED = ("templates", "framework-src", "nvbuild.sh")
DATA = Path("builder") / "_data"
COMMIT_FILE = "BUILD_COMMIT"
# Without git (a tarball, an unpacked sdist): build products never shipped (the names
# builder/image/buildcontext.py leaves out of a build context, and framework-src/.gitignore's).
SKIPPED = (
    "__pycache__",
    "*.pyc",
    "build",
    "dist",
    "*.egg-info",
    "*.o",
    "*.so",
    ".git",
    "bazel-*",
    ".pytest_cache",
    "config.mk",
    "config.mk.*",
    ".tf_configure.bazelrc*",
)


def _git(root: Path, *args: str) -> str | None:
    """git's output in ROOT, None when git is missing or fails."""
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _is_git_top(root: Path) -> bool:
    """ROOT is a git work tree's top (not a directory inside some other repository)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    return top is not None and Path(top.strip()).resolve() == root.resolve()


def build_commit(root: Path = HERE) -> str:
    """The commit ROOT's files come from: the BUILD_COMMIT an sdist carries (when ROOT is
    not a git tree's top: an unpacked sdist may sit inside another repository), else git's."""
    carried = root / COMMIT_FILE
    text = carried.read_text(encoding="utf-8").strip() if carried.is_file() else ""
    if text and not _is_git_top(root):
        return text
    rev = (_git(root, "describe", "--always", "--dirty", "--abbrev=12") or "").strip()
    # untracked files ship too (shipped_files), and `describe --dirty` does not see them
    if (
        rev
        and not rev.endswith("-dirty")
        and _git(root, "ls-files", "--others", "--exclude-standard", "--", "builder", *SHIPPED)
    ):
        rev += "-dirty"
    return rev or text or "unknown"


def _skipped(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in SKIPPED)


def _walked(root: Path) -> list[str]:
    """Every file under the shipped paths but build products (no git to ask)."""
    found = []
    for top in SHIPPED:
        if (root / top).is_file():
            found.append(top)
        for dirpath, dirnames, filenames in os.walk(root / top):
            dirnames[:] = sorted(d for d in dirnames if not _skipped(d))
            rel = Path(dirpath).relative_to(root)
            found += [(rel / f).as_posix() for f in sorted(filenames) if not _skipped(f)]
    return found


def shipped_files(root: Path = HERE) -> list[str]:
    """The shipped paths' files, relative to ROOT: in a git tree the ones git sees (tracked,
    and untracked ones it does not ignore: uncommitted work ships, build products do not)."""
    if not _is_git_top(root):
        return sorted(_walked(root))
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *SHIPPED) or ""
    # a tracked file deleted in the work tree is listed but gone
    return sorted({p for p in listed.split("\0") if p and (root / p).is_file()})


def copy_shipped(root: Path, dest: Path) -> list[str]:
    """Copy the shipped files into DEST (replaced whole: no file of an earlier build stays),
    modes kept, plus BUILD_COMMIT; returns the paths written."""
    files = shipped_files(root)
    missing = [p for p in SHIPPED if not (root / p).exists()]
    if missing:
        raise SystemExit(f"setup.py: {', '.join(missing)} missing under {root}: build from the builder's checkout")
    shutil.rmtree(dest, ignore_errors=True)
    written = []
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)  # copy2: the executable bits travel
        written.append(str(target))
    (dest / COMMIT_FILE).write_text(build_commit(root) + "\n", encoding="utf-8")
    return written + [str(dest / COMMIT_FILE)]


class BuildPy(build_py):
    """build_py, plus the shipped files under builder/_data/ of the built package."""

    def run(self) -> None:
        super().run()
        if not getattr(
            self, "editable_mode", False
        ):  # setuptools < 64 has no attribute  # an editable install reads the checkout itself
            self._data_outputs = copy_shipped(HERE, Path(self.build_lib) / DATA)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + getattr(self, "_data_outputs", [])


class Sdist(sdist):
    """sdist, plus the shipped files and BUILD_COMMIT at the sdist's top."""

    def make_release_tree(self, base_dir, files) -> None:
        super().make_release_tree(base_dir, list(files) + shipped_files(HERE))
        Path(base_dir, COMMIT_FILE).write_text(build_commit(HERE) + "\n", encoding="utf-8")


if __name__ == "__main__":
    setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
