"""Build the offline CUDA base of a release on a machine that cannot pull images:
debootstrap the Debian suite, import it, then build the recipe's CUDA layer from
Debian's own archive. The tag is derived from the recipe, so asking again is a no-op.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from builder import buildsettings, layer_cache, paths
from builder.base_recipe import DEFAULT_MIRROR, BaseRecipe
from builder.engine import BuildRequest, Engine, Progress
from builder.errors import UserError, redact


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
    """The recipe's build context: its Dockerfile and the settings wrapper it copies in."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "Dockerfile").write_text(recipe.dockerfile())
    shutil.copy2(paths.templates_dir() / "with-build-settings", dest / "with-build-settings")
    return dest


def ensure_base(engine: Engine, recipe: BaseRecipe, settings: buildsettings.BuildSettings,
                rebuild: bool = False, quiet: bool = False) -> tuple[str, bool]:
    """Return (tag, built_now). An existing tag is reused unless `rebuild`."""
    settings.validate()
    if not rebuild and engine.image_id(recipe.tag):
        return recipe.tag, False
    with tempfile.TemporaryDirectory(prefix="builder-base-") as tmp:
        work = Path(tmp)
        if rebuild or not engine.image_id(recipe.rootfs_image):
            make_rootfs(engine, recipe, settings.apt_mirror, work)
        context = write_context(recipe, work / "context")
        log_path = paths.logs_dir() / f"base-{recipe.tag.split(':')[-1]}.log"  # where every command logs
        with buildsettings.deliver(settings, engine.backend) as delivery:
            request = BuildRequest(context=context, buildargs={"BUILD_SETTINGS": delivery.url or ""},
                                   network_mode=delivery.network_mode(), log_path=log_path,
                                   quiet=quiet, secrets=delivery.secrets,
                                   cache_ref=settings.cache_ref(layer_cache.base_name(recipe.tag)),
                                   builder=settings.builder, compression=settings.compression)
            result = engine.build(request, Progress("base", quiet=quiet))
        engine.tag(result.image_id, recipe.tag)
    log(f"base: tagged {recipe.tag}")
    return recipe.tag, True
