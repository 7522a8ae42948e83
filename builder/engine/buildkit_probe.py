"""What the engine's BuildKit can do, found out by doing it: each feature is one tiny build
(`FROM scratch`, one copied file and a label: no registry, no RUN step, about a second)
through the Docker CLI's buildx, never guessed from version numbers. `builder doctor`
prints the answers."""

from __future__ import annotations

import json
import secrets
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# One real layer: an image with none makes buildx 0.13 fail a multi-platform build (a nil
# result, "panic: ... convertRef") and a bake target context ("unsupported context source
# target") even where both work, as they do on the containerd image store.
PROBE_LABEL = "dev.tfbuilder.probe"
PROBE_DOCKERFILE = "FROM scratch\nCOPY probe.txt /probe.txt\nLABEL " + PROBE_LABEL + "={run}\n"


@dataclass(frozen=True)
class Feature:
    name: str
    works: bool
    detail: str  # why not, in the CLI's own words, or what was made


def _why(stderr: str) -> str:
    """The CLI's one-line reason: its ERROR line, else the last line it printed."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("ERROR:"):
            return line.removeprefix("ERROR:").strip()
    return lines[-1] if lines else "failed without a message"


def _buildx(args: list[str], cwd: Path, timeout: int) -> tuple[bool, str]:
    try:
        out = subprocess.run(["docker", "buildx", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return False, "no docker CLI on PATH"
    except subprocess.TimeoutExpired:
        return False, f"no answer in {timeout} s"
    return out.returncode == 0, "" if out.returncode == 0 else _why(out.stderr)


def bake_file(workdir: Path) -> dict:
    """Two targets, the second FROM the first through a bake target context."""
    return {
        "target": {
            "base": {
                "context": str(workdir),
                "dockerfile": "Dockerfile",
                "output": [f"type=tar,dest={workdir}/base.tar"],
            },
            "app": {
                "context": str(workdir),
                "dockerfile": "Dockerfile.app",
                "contexts": {"base": "target:base"},
                "output": [f"type=tar,dest={workdir}/app.tar"],
            },
        }
    }


def _docker(args: list[str], timeout: int) -> str:
    """The Docker CLI's stdout ('' when it fails or is missing)."""
    try:
        out = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def remove_probe_images(run: str, timeout: int = 60) -> list[str]:
    """Remove the images this probe run left in the engine's store, found by the label value
    only this run wrote (never a user's image); the ids removed. Buildx's docker driver
    loads a bake target that another target names as its context into the store
    ("target:base"), whatever the base target's own output says."""
    found = _docker(
        ["image", "ls", "--all", "--quiet", "--no-trunc", "--filter", f"label={PROBE_LABEL}={run}"], timeout
    ).split()
    ids = list(dict.fromkeys(found))
    if ids:
        _docker(["image", "rm", *ids], timeout)
    return ids


def probe(builder: str | None = None, timeout: int = 60) -> list[Feature]:
    """Cache export, OCI output, multi-platform and bake target contexts on BUILDER (the CLI's
    current builder when None). Every probe writes into a temporary directory only; what
    the engine loads into its store anyway is removed (remove_probe_images)."""
    run = secrets.token_hex(8)
    try:
        return _probe(builder, timeout, run)
    finally:
        remove_probe_images(run, timeout)


def _probe(builder: str | None, timeout: int, run: str) -> list[Feature]:
    chosen = ["--builder", builder] if builder else []
    with tempfile.TemporaryDirectory(prefix="tfbuilder-probe-") as tmp:
        d = Path(tmp)
        (d / "Dockerfile").write_text(PROBE_DOCKERFILE.format(run=run))
        (d / "probe.txt").write_text("tfbuilder BuildKit probe\n")
        (d / "Dockerfile.app").write_text("FROM base\nLABEL dev.tfbuilder.probe.app=1\n")
        common = ["build", *chosen, "--progress=quiet", "--provenance=false", str(d)]
        runs = {
            "cache export": common
            + ["--cache-to", f"type=local,dest={d}/cache", "--output", f"type=tar,dest={d}/c.tar"],
            "OCI output": common + ["--output", f"type=oci,dest={d}/image.oci.tar"],
            "multi-platform": common + ["--platform", "linux/amd64,linux/arm64", "--output", f"type=tar,dest={d}/mp"],
        }
        found = []
        for name, args in runs.items():
            ok, why = _buildx(args, d, timeout)
            found.append(Feature(name, ok, "works" if ok else why))
        (d / "bake.json").write_text(json.dumps(bake_file(d)))
        ok, why = _buildx(["bake", *chosen, "--progress=quiet", "-f", str(d / "bake.json"), "app"], d, timeout)
        found.append(Feature("bake contexts", ok and (d / "app.tar").is_file(), "works" if ok else why))
    return found
