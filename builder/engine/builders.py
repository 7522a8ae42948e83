"""Building on other builders than this engine's own (--builder NAME, --builders A,B).

A name is either a Docker context (another Docker engine: buildx's `docker` driver builds
there and the engine keeps the images it starts FROM) or a buildx builder instance
(docker-container, remote, kubernetes drivers: BuildKit with no image store of its own,
which resolves FROM through registries). Either way the image comes back here as an
archive and is checked and tagged here (builder/engine/buildkit_engine.py).

What this module adds: where a name points (`where`), the images a build starts FROM made
present on that builder (`ensure_inputs`: copied into another engine with `docker save |
docker load`, refused in one line for a builder instance when the image is only on this
engine), and the --all matrix spread over several builders (`parse`, `assign`: pure)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

from builder.core.errors import UserError
from builder.engine import buildx

# Build arguments that name the image a Dockerfile starts FROM (templates/ and the base recipe).
FROM_ARGS = ("BASE_IMAGE", "ROOTFS_IMAGE")
HERE = "default"  # this engine's own builder, as buildx names it


@dataclass(frozen=True)
class Where:
    name: str  # as the user gave it ("default": this engine)
    flag: str | None  # buildx's --builder (None: chosen through DOCKER_CONTEXT)
    env: dict[str, str]  # buildx's environment
    engine: bool  # a Docker engine (this one or a context's): it has an image store

    @property
    def here(self) -> bool:
        return self.name == HERE


def where(name: str | None, here_env: dict[str, str]) -> Where:
    """Where NAME builds (None or "default": this engine)."""
    if name in (None, HERE):
        return Where(HERE, HERE, here_env, True)
    flag, env = buildx.on_builder(name, here_env)
    return Where(name, flag, env, flag is None)


def parse(value: str) -> tuple[str, ...]:
    """--builders A,B: distinct builder names, in the order given (checked with buildx later)."""
    names = tuple(n.strip() for n in value.split(","))
    for n in names:
        if not buildx.BUILDER_NAME.fullmatch(n):
            raise UserError(
                f"--builders {value[:80]!r}: {n[:40]!r} is not a builder name "
                "(comma-separated names, as docker buildx ls lists them)"
            )
    if len(set(names)) != len(names):
        raise UserError(f"--builders {value[:80]!r}: a builder is named twice")
    return names


def assign(targets: list[str], builders: tuple[str, ...]) -> dict[str, list[str]]:
    """TARGETS spread over BUILDERS in turn (sorted targets, builders in the order given);
    a builder with nothing to build is left out."""
    spread: dict[str, list[str]] = {b: [] for b in builders}
    for i, target in enumerate(sorted(targets)):
        spread[builders[i % len(builders)]].append(target)
    return {b: ts for b, ts in spread.items() if ts}


def from_images(definition: dict, targets: list[str]) -> list[str]:
    """The images TARGETS of a bake definition start FROM and take from an image store
    (an image bound to another target through `contexts` is built in the same bake)."""
    images = set()
    for name in targets:
        t = definition["target"][name]
        images |= {v for k, v in t.get("args", {}).items() if k in FROM_ARGS and v not in t.get("contexts", {})}
        images |= set(
            from_images(
                definition,
                [c.removeprefix("target:") for c in t.get("contexts", {}).values() if c.startswith("target:")],
            )
        )
    return sorted(images)


def _inspect(ref: str, env: dict[str, str]) -> dict | None:
    out = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, text=True, env=env)
    return json.loads(out.stdout)[0] if out.returncode == 0 else None


def ensure_inputs(at: Where, images: list[str], here_env: dict[str, str], say: Callable[[str], None]) -> None:
    """Make every one of IMAGES (this engine's) resolvable by the builder AT before it builds."""
    if at.here:
        return
    for ref in images:
        mine = _inspect(ref, here_env)
        if mine is None:
            continue  # not an image of this engine: the builder resolves it (a registry) or says why
        if not at.engine:
            if not mine.get("RepoDigests"):
                raise UserError(
                    f"--builder {at.name}: a buildx builder instance resolves FROM through registries, "
                    f"and {ref} exists only on this engine: push it to a registry the builder reaches "
                    "and build from there"
                )
            continue
        theirs = _inspect(ref, at.env)
        if theirs is not None and theirs.get("Id") == mine.get("Id"):
            continue
        say(f"copying {ref} to {at.name} (docker save | docker load)")
        start = time.monotonic()
        copy(ref, here_env, at.env)
        say(f"copied {ref} to {at.name} in {time.monotonic() - start:.0f}s")


def copy(ref: str, here_env: dict[str, str], there_env: dict[str, str]) -> None:
    """`docker save REF` here piped into `docker load` there; a one-line error when either fails."""
    save = subprocess.Popen(["docker", "save", ref], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=here_env)
    try:
        load = subprocess.run(
            ["docker", "load", "-q"], stdin=save.stdout, capture_output=True, text=True, env=there_env
        )
    finally:
        if save.stdout is not None:  # both are pipes (Popen above)
            save.stdout.close()
        save_err = save.stderr.read().decode("utf-8", "replace") if save.stderr is not None else ""
        if save.stderr is not None:
            save.stderr.close()
        save_rc = save.wait()
    if save_rc != 0 or load.returncode != 0:
        why = (save_err.strip() if save_rc != 0 else load.stderr.strip() or load.stdout.strip()) or "no answer"
        raise UserError(f"could not copy {ref} to the builder: {why.splitlines()[-1]}")
