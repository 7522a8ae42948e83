"""Every path the builder uses, in one place.

The project's non-Python parts (templates/, framework-src/, nvbuild.sh) sit at the top of
the checkout (the fixed layout). The builder runs from one of two places: a checkout (an
editable install, `pip install -e .`: the directory above builder/ holds templates/; or the
directory BUILDER_HOME names), or an installed wheel, which carries copies of them under
builder/_data/ (setup.py puts them there, with the commit the wheel was built from). What
only a checkout has (dockerfiles/, the git history) is asked for with checkout_root().

What commands write (build logs, the settings server's state, the compile cache, read-back
reports) lives under one cache directory: BUILDER_CACHE_DIR, else $XDG_CACHE_HOME/tfbuilder,
else ~/.cache/tfbuilder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from builder.core.errors import UserError

# The engine's trust per registry (HOST[:PORT]/ca.crt, client.cert, client.key): the builder's
# own registry requests and cosign trust the same.
CERTS_D = Path("/etc/docker/certs.d")
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # builder/, above core/
# An installed wheel's templates/, framework-src/, nvbuild.sh and BUILD_COMMIT (setup.py).
DATA_DIR = PACKAGE_DIR / "_data"
BUILD_COMMIT = DATA_DIR / "BUILD_COMMIT"


def checkout_root() -> Path | None:
    """The checkout the builder runs from: BUILDER_HOME, else the directory above builder/
    when it holds templates/ (an editable install); None for an installed wheel (its data
    wins: a site-packages may hold some other distribution's templates/)."""
    env = os.environ.get("BUILDER_HOME")
    if env:
        return Path(env)
    parent = PACKAGE_DIR.parent
    return parent if (parent / "templates").is_dir() and not DATA_DIR.is_dir() else None


def project_root() -> Path:
    """Where templates/, framework-src/ and nvbuild.sh are: the checkout, else the wheel's data."""
    checkout = checkout_root()
    root = checkout or DATA_DIR
    if not (root / "templates").is_dir():
        if checkout is not None:
            raise UserError(f"BUILDER_HOME={checkout} has no templates/: point it at the builder's checkout")
        raise UserError(
            f"the installed builder has no templates/ under {root}: reinstall it "
            "(`pip install .` from its checkout), or set BUILDER_HOME to the checkout"
        )
    return root


def require_checkout(what: str, instead: str = "") -> Path:
    """The checkout's root, for WHAT (a clause saying what needs it) that only a checkout
    has; INSTEAD: what works without one, offered first."""
    root = checkout_root()
    if root is None:
        offer = f"{instead}, or " if instead else ""
        raise UserError(
            f"{what}, and this builder is installed from a wheel ({PACKAGE_DIR}): "
            f"{offer}run it from its checkout (or set BUILDER_HOME to one)"
        )
    project_root()  # a BUILDER_HOME without templates/ is refused here too
    return root


def templates_dir() -> Path:
    return project_root() / "templates"


def framework_src_dir() -> Path:
    return project_root() / "framework-src"


def nvbuild_script() -> Path:
    return project_root() / "nvbuild.sh"


def in_image_module(name: str) -> Path:
    """One of the standard-library modules that run inside images (contract.InImage.IN_IMAGE_MODULES)."""
    return PACKAGE_DIR / "in_image" / name


# --- what the commands write ----------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get("BUILDER_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "tfbuilder"


def logs_dir() -> Path:
    """Build, base and derive logs (created on first use)."""
    d = cache_dir() / "logs"
    d.mkdir(parents=True, exist_ok=True)
    return d


def settings_state_dir() -> Path:
    """The settings server's state: its key, port and the settings of running builds (0700)."""
    d = cache_dir() / "settings"
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o700)
    return d


def compile_cache_dir() -> Path:
    """Default directory of `builder cache serve`."""
    return cache_dir() / "compile-cache"


def readback_store() -> Path:
    """Read-back reports kept under the image's content key (a no-op rebuild reuses one)."""
    return cache_dir() / "readback"


def kept_json(path: Path | None, make: Callable[[], dict]) -> dict:
    """The document kept at PATH, else make()'s, then kept there (PATH None: make() only).
    A damaged entry is made again; the write is atomic, so a concurrent build reads a
    whole document or none."""
    if path and path.is_file():
        try:
            return json.loads(path.read_text())
        except ValueError:
            pass  # damaged: made again and rewritten
    doc = make()
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(path)
    return doc
