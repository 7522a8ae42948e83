"""`builder --version`: the installed version, and the commit the builder's files come from
(its checkout's, or the one its wheel was built from). Images name the same commit
(BUILD_REF, provenance.source_ref)."""

from __future__ import annotations

import re
import subprocess
from importlib import metadata
from pathlib import Path

from builder.core import paths

DIST = "tf-image-builder"
# What `git describe` prints (a hash, or a tag with -N-gHASH, and -dirty): the commit is a
# build argument and a label, so a damaged BUILD_COMMIT reads as unknown, never as text.
COMMIT = re.compile(r"^[\w./+-]{1,128}$")


def package_version() -> str:
    """The installed distribution's version ("unknown" when run from a checkout never installed)."""
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        return "unknown"


def checkout_commit(root: Path) -> str:
    """ROOT's commit as `git describe` says it, -dirty with uncommitted changes; "unknown"
    without git or outside a repository."""
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    commit = rev.stdout.strip() if rev.returncode == 0 else ""
    if not commit:
        return "unknown"
    # untracked files reach the image (and a wheel) too, and `describe --dirty` does not see them
    if not commit.endswith("-dirty"):
        others = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "--others",
                "--exclude-standard",
                "--",
                "builder",
                "templates",
                "framework-src",
                "nvbuild.sh",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if others.returncode == 0 and others.stdout.strip():
            commit += "-dirty"
    return commit


def packaged_commit() -> str:
    """The commit an installed wheel was built from (setup.py wrote it); "unknown" without one."""
    try:
        text = paths.BUILD_COMMIT.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return "unknown"
    return text if COMMIT.match(text) else "unknown"


def installed_from() -> str:
    """ "checkout" (editable, or BUILDER_HOME) or "wheel"."""
    return "wheel" if paths.checkout_root() is None else "checkout"


def source_commit() -> str:
    """The commit the builder's templates, nvbuild.sh and code come from."""
    root = paths.checkout_root()
    return packaged_commit() if root is None else checkout_commit(root)


def version_text() -> str:
    """What `builder --version` prints, e.g. `builder 0.1.0 (commit 3d697ed6e6bb, checkout)`."""
    return f"builder {package_version()} (commit {source_commit()}, {installed_from()})"
