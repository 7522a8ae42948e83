"""Every path the builder uses, in one place.

The project's non-Python parts (templates/, framework-src/, nvbuild.sh) sit at the top of
the checkout (the fixed layout), so the builder is installed editable (`pip install -e .`);
BUILDER_HOME points elsewhere when needed.

What commands write (build logs, the settings server's state, the compile cache, read-back
reports) lives under one cache directory: BUILDER_CACHE_DIR, else $XDG_CACHE_HOME/tfbuilder,
else ~/.cache/tfbuilder.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from builder.errors import UserError

# The engine's trust per registry (HOST[:PORT]/ca.crt, client.cert, client.key): the builder's
# own registry requests and cosign trust the same.
CERTS_D = Path("/etc/docker/certs.d")


def project_root() -> Path:
    env = os.environ.get("BUILDER_HOME")
    root = Path(env) if env else Path(__file__).resolve().parent.parent
    if not (root / "templates").is_dir():
        raise UserError(f"no templates/ under {root}: install the builder with `pip install -e .` "
                        "from its checkout, or set BUILDER_HOME to the checkout")
    return root


def templates_dir() -> Path:
    return project_root() / "templates"


def framework_src_dir() -> Path:
    return project_root() / "framework-src"


def nvbuild_script() -> Path:
    return project_root() / "nvbuild.sh"


def cuda_arch_module() -> Path:
    return Path(__file__).resolve().parent / "cuda_arch.py"


def image_report_module() -> Path:
    return Path(__file__).resolve().parent / "image_report.py"


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
