"""Where the project's non-Python parts live: templates/, framework-src/, nvbuild.sh.

They sit at the top of the checkout (the fixed layout), so the builder is installed
editable (`pip install -e .`); BUILDER_HOME points elsewhere when needed.
"""
from __future__ import annotations

import os
from pathlib import Path

from builder.errors import UserError


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
