"""Build the offline CUDA base of a release on a machine that cannot pull images:
debootstrap the Debian suite, import it, then build the recipe's CUDA layer from
Debian's own archive. The tag is derived from the recipe, so asking again is a no-op.
Also where a build's base decision (plan.BaseDecision) meets the engine: `choose`.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder import image
from builder.core.errors import UserError
from builder.core.redact import redact
from builder.engine import Engine, ImageStore, ProgressMode, buildsettings
from builder.render.base_recipe import DEFAULT_MIRROR, BaseRecipe
from builder.render.job import ImageJob

if TYPE_CHECKING:
    from builder.plan import BaseDecision


def log(message: str) -> None:
    print(redact(message), file=sys.stderr, flush=True)  # the mirror URL may carry credentials


def make_rootfs(engine: Engine, recipe: BaseRecipe, mirror: str | None, workdir: Path) -> str:
    """debootstrap + docker import; the mirror used leaves no trace in the file system.
    WORKDIR is the caller's to remove (remove_work_tree): debootstrap may leave /proc and
    /sys mounted in it, on failure too."""
    if shutil.which("debootstrap") is None:
        raise UserError("debootstrap is not installed (run `bash scripts/setup.sh`)")
    suite = recipe.offline.debian
    target = workdir / "rootfs"
    log(f"base: debootstrap {suite} (minbase) from {mirror or DEFAULT_MIRROR}")
    result = subprocess.run(
        ["debootstrap", "--variant=minbase", suite, str(target), mirror or DEFAULT_MIRROR],
        capture_output=True,
        text=True,
    )
    unmount_under(workdir)  # before the tree is read or packed: a /proc mounted there is the host's
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        raise UserError(
            f"debootstrap {suite} failed (exit {result.returncode}): {tail.splitlines()[-1] if tail else ''}"
        )
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


# --- the base's work tree: debootstrap mounts /proc (and /sys, /dev/pts) inside it -----------
def _unescape_mountinfo(field: str) -> str:
    """/proc/self/mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts_under(root: Path, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """The mount points at or under ROOT (its real path), deepest first."""
    top = os.path.realpath(root)
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    points = {_unescape_mountinfo(line.split()[4]) for line in lines if len(line.split()) > 4}
    inside = [p for p in points if p == top or p.startswith(top.rstrip("/") + "/")]
    return sorted(inside, key=lambda p: (p.count("/"), p), reverse=True)


def unmount_under(root: Path) -> list[str]:
    """Unmount everything mounted at or under ROOT, deepest first (a lazy unmount where a
    plain one fails: a process may still be reading inside); the mount points left."""
    left = mounts_under(root)
    for _ in range(3):  # mounts stacked on one point come off one a round
        for point in left:
            for command in (["umount", point], ["umount", "-l", point]):
                try:
                    if subprocess.run(command, capture_output=True, timeout=60).returncode == 0:
                        break
                except (OSError, subprocess.SubprocessError):
                    pass
        still = mounts_under(root)
        if not still or still == left:
            return still
        left = still
    return left


def _clear(dir_fd: int, where: str, device: int, left: list[str]) -> None:
    """Remove what the directory DIR_FD (at WHERE) holds, by descriptor: no link is followed
    and no other file system (a mount left behind) is entered; what stays goes to LEFT."""
    with os.scandir(dir_fd) as entries:
        listed = list(entries)
    for entry in listed:
        path = f"{where}/{entry.name}"
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(entry.name, dir_fd=dir_fd)  # a link is removed itself, never its target
                continue
            fd = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                if st.st_dev != device or not os.path.samestat(st, os.fstat(fd)):
                    left.append(f"{path} (a mount point, or it changed while being removed)")
                    continue
                before = len(left)
                _clear(fd, path, device, left)
            finally:
                os.close(fd)
            if len(left) == before:
                os.rmdir(entry.name, dir_fd=dir_fd)
        except OSError as exc:
            left.append(f"{path} ({exc.strerror or exc})")


def remove_work_tree(root: Path) -> str:
    """Remove ROOT (a directory this process made), unmounting first what is still mounted
    under it; '' when it is gone, else one line naming what is left."""
    mounted = unmount_under(root)
    if mounted:
        return f"{mounted[0]} is still mounted: nothing under {root} was removed"
    left: list[str] = []
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"{root} ({exc.strerror or exc})"
    try:
        _clear(fd, str(root), os.fstat(fd).st_dev, left)
    except (OSError, RecursionError) as exc:
        left.append(f"{root} ({getattr(exc, 'strerror', None) or exc})")
    finally:
        os.close(fd)
    if not left:
        try:
            os.rmdir(root)
        except OSError as exc:
            left.append(f"{root} ({exc.strerror or exc})")
    return left[0] + (f" and {len(left) - 1} more" if len(left) > 1 else "") if left else ""


def write_context(recipe: BaseRecipe, dest: Path, root: Path | None = None) -> Path:
    """The recipe's build context (`builder bake`), below ROOT (the user's -o) without
    following a link; a re-bake replaces only what a bake wrote there."""
    return image.write_files(recipe.files_context(), dest, root, {"base": recipe.tag})


def ensure_base(
    engine: Engine,
    recipe: BaseRecipe,
    settings: buildsettings.BuildSettings,
    rebuild: bool = False,
    progress: ProgressMode = ProgressMode.AUTO,
    job: ImageJob | None = None,
) -> tuple[str, bool]:
    """Return (tag, built_now). An existing tag is reused unless `rebuild`. JOB: the
    recipe's job as the plan made it (else made here)."""
    job = job or recipe.job()
    settings.validate()
    if not rebuild and engine.image_id(recipe.tag):
        return recipe.tag, False
    if rebuild or not engine.image_id(recipe.rootfs_image):
        workdir = Path(tempfile.mkdtemp(prefix="builder-base-"))
        try:
            make_rootfs(engine, recipe, settings.apt_mirror, workdir)
        finally:  # on failure and interrupt too; a leftover is one line, never the build's error
            left = remove_work_tree(workdir)
            if left:
                log(f"base: the work tree is left behind: could not remove {left}")
    image.produce(engine, job, settings, progress)
    log(f"base: tagged {recipe.tag}")
    return recipe.tag, True


@dataclass(frozen=True)
class BaseChoice:
    kind: str  # upstream | offline | custom
    image: str
    reason: str
    needs_build: bool = False


def choose(engine: ImageStore | None, decision: BaseDecision, dry_run: bool) -> BaseChoice:
    """DECISION's base: the offline base (used when here, else built), or an image used
    when here, else pulled (nothing is pulled under --dry-run). No fallback to another
    base: the tag a build moves always names the same recipe. No ENGINE (a dry run
    without one): the first option, its presence unknown."""
    if engine is None:
        first = decision.options[0]
        return BaseChoice(
            first.kind,
            first.image,
            f"{decision.asked}: {first.description}, presence not checked",
            needs_build=first.obtain == "build",
        )
    for option in decision.options:
        if option.obtain == "build":
            present = engine.image_id(option.image) is not None
            return BaseChoice(
                option.kind,
                option.image,
                f"{decision.asked}: {option.description}" + ("" if present else ", to be built"),
                needs_build=not present,
            )
        if engine.image_id(option.image):
            return BaseChoice(option.kind, option.image, f"{decision.asked}: present locally")
        if not dry_run and engine.pull(option.image):
            return BaseChoice(option.kind, option.image, f"{decision.asked}: pulled")
        if dry_run:
            return BaseChoice(option.kind, option.image, f"{decision.asked}: not present locally, to be pulled")
    raise UserError(decision.refusal)


def prepare(
    engine: Engine,
    choice: BaseChoice,
    recipe: BaseRecipe,
    job: ImageJob | None,
    settings: buildsettings.BuildSettings,
    progress: ProgressMode,
) -> None:
    """Build the offline base (RECIPE, as JOB) when CHOICE needs it."""
    if choice.needs_build:
        log(f"base: building {choice.image}")
        ensure_base(engine, recipe, settings, progress=progress, job=job)
