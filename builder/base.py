"""Build the offline CUDA base of a release on a machine that cannot pull images:
debootstrap the Debian suite, import it, then build the recipe's CUDA layer from
Debian's own archive. The tag is derived from the recipe, so asking again is a no-op.
Also where a build's base decision (plan.BaseDecision) meets the engine: `choose`.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder import buildsettings, image
from builder.base_recipe import DEFAULT_MIRROR, BaseRecipe
from builder.engine import Engine, ImageStore
from builder.errors import UserError, redact
from builder.job import ImageJob

if TYPE_CHECKING:
    from builder.plan import BaseDecision


def log(message: str) -> None:
    print(redact(message), file=sys.stderr, flush=True)  # the mirror URL may carry credentials


def make_rootfs(engine: Engine, recipe: BaseRecipe, mirror: str | None, workdir: Path) -> str:
    """debootstrap + docker import; the mirror used leaves no trace in the file system."""
    if shutil.which("debootstrap") is None:
        raise UserError("debootstrap is not installed (run `bash scripts/setup.sh`)")
    suite = recipe.offline.debian
    target = workdir / "rootfs"
    log(f"base: debootstrap {suite} (minbase) from {mirror or DEFAULT_MIRROR}")
    result = subprocess.run(
        ["debootstrap", "--variant=minbase", suite, str(target), mirror or DEFAULT_MIRROR],
        capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        raise UserError(f"debootstrap {suite} failed (exit {result.returncode}): {tail.splitlines()[-1] if tail else ''}")
    # Forget where the packages came from: the recipe writes its own sources.list.
    (target / "etc/apt/sources.list").write_text(f"deb {DEFAULT_MIRROR} {suite} main\n")
    for leftover in ("var/lib/apt/lists", "var/cache/apt/archives"):
        d = target / leftover
        for item in d.glob("*"):
            if item.is_file():
                item.unlink()
    tar = workdir / "rootfs.tar"
    subprocess.run(["tar", "-C", str(target), "--numeric-owner", "-cf", str(tar), "."], check=True)
    image = engine.import_rootfs(tar, recipe.rootfs_image)
    log(f"base: imported {recipe.rootfs_image} ({image[:19]})")
    return image


def write_context(recipe: BaseRecipe, dest: Path) -> Path:
    """The recipe's build context (`builder bake`)."""
    return image.write_files(recipe.job().context, dest)


def ensure_base(engine: Engine, recipe: BaseRecipe, settings: buildsettings.BuildSettings,
                rebuild: bool = False, quiet: bool | str = False, job: ImageJob | None = None) -> tuple[str, bool]:
    """Return (tag, built_now). An existing tag is reused unless `rebuild`. JOB: the
    recipe's job as the plan made it (else made here)."""
    job = job or recipe.job()
    settings.validate()
    if not rebuild and engine.image_id(recipe.tag):
        return recipe.tag, False
    if rebuild or not engine.image_id(recipe.rootfs_image):
        with tempfile.TemporaryDirectory(prefix="builder-base-") as tmp:
            make_rootfs(engine, recipe, settings.apt_mirror, Path(tmp))
    image.produce(engine, job, settings, quiet)
    log(f"base: tagged {recipe.tag}")
    return recipe.tag, True


@dataclass(frozen=True)
class BaseChoice:
    kind: str      # upstream | offline | custom
    image: str
    reason: str
    needs_build: bool = False


def choose(engine: ImageStore, decision: BaseDecision, dry_run: bool) -> BaseChoice:
    """DECISION's base: the offline base (used when here, else built), or an image used
    when here, else pulled (nothing is pulled under --dry-run). No fallback to another
    base: the tag a build moves always names the same recipe."""
    for option in decision.options:
        if option.obtain == "build":
            present = engine.image_id(option.image) is not None
            return BaseChoice(option.kind, option.image, f"{decision.asked}: {option.description}"
                              + ("" if present else ", to be built"), needs_build=not present)
        if engine.image_id(option.image):
            return BaseChoice(option.kind, option.image, f"{decision.asked}: present locally")
        if not dry_run and engine.pull(option.image):
            return BaseChoice(option.kind, option.image, f"{decision.asked}: pulled")
        if dry_run:
            return BaseChoice(option.kind, option.image, f"{decision.asked}: not present locally, to be pulled")
    raise UserError(decision.refusal)


def prepare(engine: Engine, choice: BaseChoice, recipe: BaseRecipe, job: ImageJob,
            settings: buildsettings.BuildSettings, quiet: bool | str) -> None:
    """Build the offline base (RECIPE, as JOB) when CHOICE needs it."""
    if choice.needs_build:
        log(f"base: building {choice.image}")
        ensure_base(engine, recipe, settings, quiet=quiet, job=job)
