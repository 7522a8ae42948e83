"""BuildKit's layer cache in a registry (`--layer-cache HOST[:PORT]/REPO`): each image the
builder builds reads the cache before and writes it after (`mode=max`: every step's
layers, not only the final image's), under a tag of its own in REPO, so that another
machine, or this one after its build cache was wiped, rebuilds from the registry instead
of from scratch.

Pure but for check_reachable(): the reference's grammar, the per-image tag and the
buildx flags. The registry's
credentials are the Docker CLI's (`docker login`): buildx hands them to BuildKit through
its session, never as a build argument."""

from __future__ import annotations

import re

from builder.core.contract import port_problem
from builder.core.errors import UserError

# HOST[:PORT]/path: the host must look like one (a dot, a port or localhost): a bare
# "team/cache" would mean Docker Hub, which these machines cannot reach.
_HOST = r"(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|\[[0-9A-Fa-f:]+\]|[A-Za-z0-9-]+(?=:))(?::[0-9]{1,5})?"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
REPO = re.compile(rf"({_HOST})/({_PATH})")
_TAG_JUNK = re.compile(r"[^A-Za-z0-9_.-]+")


def check(repo: str) -> str:
    """REPO as given, or a one-line refusal (a tag or digest is the builder's to choose)."""
    m = REPO.fullmatch(repo) if len(repo) <= 255 else None
    if m is None:
        raise UserError(
            f"--layer-cache {repo[:80]!r}: give a registry repository HOST[:PORT]/NAME "
            "(lower case, no tag: the builder adds one tag per image)"
        )
    why = port_problem(m.group(1))
    if why:
        raise UserError(f"--layer-cache {repo[:80]!r}: the registry {why}")
    return repo


def ref_for(repo: str, image: str) -> str:
    """The cache's tag for IMAGE (a name such as 21.08-tf2-py3 or a tag's tail)."""
    tag = _TAG_JUNK.sub("-", image).strip("-.") or "cache"
    return f"{repo}:{tag[:128]}"


def base_name(base_tag: str) -> str:
    """An offline base's cache name: its tag without the recipe hash, so that a changed
    recipe still finds the layers of the steps it did not change."""
    tail = base_tag.rsplit(":", 1)[-1]
    return "base-" + re.sub(r"-[0-9a-f]{12}$", "", tail)


def buildx_flags(ref: str) -> list[str]:
    return ["--cache-from", f"type=registry,ref={ref}", "--cache-to", f"type=registry,ref={ref},mode=max"]


# What buildx says when the engine's builder cannot export caches (the classic image store).
NO_EXPORT = re.compile(r"cache export (feature )?is (currently )?not supported", re.I)


def no_export_error() -> UserError:
    return UserError(
        "--layer-cache: this engine cannot export build caches; keep its images in containerd "
        '("features": {"containerd-snapshotter": true} in /etc/docker/daemon.json, as '
        'scripts/setup.sh writes it; `builder doctor` shows "cache export")'
    )


def check_reachable(repo: str, timeout: float = 10.0) -> None:
    """A registry that does not answer is reported now, not after the build it would have
    failed at its end (BuildKit exports the cache last)."""
    import socket

    match = REPO.fullmatch(repo)
    if match is None:
        raise UserError(f"--layer-cache {repo[:80]!r}: give a registry repository HOST[:PORT]/NAME")
    host = match.group(1)
    name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
    if not name or not port.isdigit():
        name, port = host, "443"
    try:
        socket.create_connection((name.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise UserError(
            f"--layer-cache {repo}: cannot reach {name}:{port} ({exc.strerror or type(exc).__name__})"
        ) from None
