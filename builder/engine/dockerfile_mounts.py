"""The legacy builder's Dockerfile: it cannot parse `RUN --mount`, so the builder's own
mounts (settings, compile cache) are taken out of a copy it reads instead."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from builder.core.contract import BUILDER_MOUNT


def without_builder_mounts(text: str) -> str:
    """A Dockerfile with the builder's own mounts (settings, compile cache) taken out of its RUN lines."""
    return "\n".join(BUILDER_MOUNT.sub("", line) if line.startswith("RUN ") else line for line in text.split("\n"))


@contextmanager
def legacy_dockerfile(context: Path) -> Iterator[str]:
    """The Dockerfile for the legacy builder, which cannot parse mounts (it gets the
    settings over loopback instead, and no local compile cache): a copy without them, outside the
    context (docker-py sends it along), removed afterwards; the context's own file when
    it has none."""
    path = context / "Dockerfile"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    stripped = without_builder_mounts(text)
    if stripped == text:
        yield "Dockerfile"
        return
    fd, name = tempfile.mkstemp(prefix="tfbuilder-legacy-", suffix=".Dockerfile")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(stripped)
        yield name
    finally:
        os.unlink(name)
