"""A private catalog (BUILDER_CATALOG) whose 21.08 has a second buildable variant,
`tf2-py3-amp`: the same framework and locks as tf2-py3, automatic mixed precision on by
default. The shipped releases have one buildable variant each (TensorFlow 1.15 has no
wheel for the bases' Python), and spreading --all over builders needs two."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from builder import catalog, components
from builder.catalog import lock

VARIANT = "tf2-py3-amp"
ENV = {"TF_ENABLE_AUTO_MIXED_PRECISION": "1"}


def write(dest: Path) -> Path:
    """The catalog at DEST (releases and locks); returns DEST."""
    dest.mkdir(parents=True)
    for name in ("_common.yaml", "21.06.yaml", "21.08.yaml"):  # 21.08 and what it inherits
        shutil.copy(catalog.RELEASES_DIR / name, dest / name)
    for name in ("21.06", "21.08"):
        shutil.copytree(lock.LOCKS_DIR / name, dest / "locks" / name)
    release = catalog.load(catalog.RELEASES_DIR).get("21.08")
    for name, spec in release.components.items():  # the sdists its components compile
        sdist = components.get(name).sdist(spec)
        if sdist:
            (dest / "locks" / name).mkdir()
            shutil.copy(lock.sdist_lock_path(name, *sdist, lock.LOCKS_DIR), dest / "locks" / name)
    resolved = catalog.load(catalog.RELEASES_DIR).get("21.08").resolved
    data = yaml.safe_load((dest / "21.08.yaml").read_text())
    data["variants"][VARIANT] = {"framework": resolved["variants"]["tf2-py3"]["framework"], "env": dict(ENV)}
    (dest / "21.08.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    for theirs in (dest / "locks" / "21.08").glob("tf2-py3-py*.txt"):
        shutil.copy(theirs, theirs.with_name(theirs.name.replace("tf2-py3-", f"{VARIANT}-")))
    return dest
