"""The runtime image of a release variant (`builder build --runtime`): the devel image's
Python packages, entrypoint, examples, environment and labels on the offline base's bare
Debian root file system, without the compiler toolchain or the CUDA toolkit. Built after
the devel image (which derived images keep using), read back and checked like it, then
tagged `<tag>-runtime`.

Only a release whose every CUDA library TensorFlow loads comes from NVIDIA's wheels can
have one (26.11): the older releases load cuBLAS, cuFFT, ... from the base's toolkit.
"""
from __future__ import annotations

import dataclasses

from pathlib import Path
import tempfile

from builder import buildsettings
from builder.base_recipe import BaseRecipe
from builder.catalog import Release, Variant
from builder.contract import Label
from builder.engine import BuildRequest, Engine, Progress
from builder.errors import BuildError, UserError
from builder.render import RenderOptions, make_context, template_env

# gpu_wheels components that must all be there: TensorFlow's CUDA libraries and cuDNN
RUNTIME_WHEELS = ("cuda_runtime", "cublas", "cufft", "curand", "cusolver", "cusparse", "cudnn")
# what a runtime image must not hold (found on PATH in a container of it)
TOOLCHAIN = ("nvcc", "gcc", "g++", "cc", "c++", "make", "cuobjdump")
SUFFIX = "-runtime"


def refusal(release: Release) -> str | None:
    missing = [w for w in RUNTIME_WHEELS if w not in release.gpu_wheels]
    if missing:
        return (f"release {release.name} has no runtime image: TensorFlow loads its {', '.join(missing)} "
                "from the base's CUDA toolkit, not from NVIDIA's wheels (26.11 has them all)")
    return None


def render(release: Release, variant: Variant, options: RenderOptions | None = None) -> str:
    """The runtime Dockerfile (pure): the release variant's context as the devel image's render
    makes it, on the offline base's root file system."""
    why = refusal(release)
    if why:
        raise UserError(why)
    if options is None:
        from builder.plan import render_options

        options = render_options(release)  # the release's own, as dockerfiles/ has it
    # it stands on the offline base's Debian whatever the devel image was asked to stand on
    # (run.py refuses another base): its base label says so
    ctx = make_context(release, variant, dataclasses.replace(options, base="offline"))
    return template_env().get_template("runtime/Dockerfile.j2").render(
        ctx=ctx, rootfs=BaseRecipe(release.offline).rootfs_image, suite=release.offline.debian,
        python=release.offline.python, cuda=release.offline.cuda)


def refs_for(devel_refs: list[str]) -> list[str]:
    return [f"{ref}{SUFFIX}" for ref in devel_refs]


def build(engine: Engine, release: Release, variant: Variant, options: RenderOptions, devel_image: str,
          settings: buildsettings.BuildSettings, log_path: Path, quiet: bool, buildargs: dict[str, str]) -> str:
    """Build the runtime image untagged from DEVEL_IMAGE (an id or a tag); returns its id."""
    with tempfile.TemporaryDirectory(prefix="builder-runtime-") as tmp:
        (Path(tmp) / "Dockerfile").write_text(render(release, variant, options), encoding="utf-8")
        with buildsettings.deliver(settings, engine.backend) as delivery:
            args = {**buildargs, "DEVEL_IMAGE": devel_image, "BUILD_SETTINGS": delivery.url or ""}
            request = BuildRequest(context=Path(tmp), buildargs=args, nocache=False,
                                   network_mode=delivery.network_mode(), log_path=log_path,
                                   quiet=quiet, secrets=delivery.secrets, builder=settings.builder,
                                   compression=settings.compression)
            return engine.build(request, Progress(f"{release.name}/{variant.name} runtime", quiet=quiet)).image_id


def toolchain_found(engine: Engine, image: str) -> list[str]:
    """The compilers and CUDA tools on the image's PATH (none, in a runtime image)."""
    script = "for t in " + " ".join(TOOLCHAIN) + "; do command -v \"$t\" || true; done"
    code, out = engine.run_capture(image, ["/bin/sh", "-c", script], stdout_only=True, timeout=120)
    if code != 0:
        raise BuildError(f"{image}: could not look for a compiler in the runtime image (exit {code})",
                         step="read-back check")
    return [line for line in out.split() if line]


def make(engine: Engine, release: Release, variant: Variant, options: RenderOptions, meta: dict, devel_refs: list[str],
         build_id: str, settings: buildsettings.BuildSettings, quiet: bool) -> list[str]:
    """The runtime image of a devel image just built and tagged DEVEL_REFS: built, checked
    (no compiler; what it reports matches the catalog like the devel image; the extension
    is the devel image's file, by digest), labelled, then tagged `<ref>-runtime`."""
    from builder import build as b, paths  # build imports render, which this module's users import first

    log_path = paths.logs_dir() / f"{release.name}-{variant.name}-{build_id}{SUFFIX}.log"
    devel = devel_refs[0]
    recipe = BaseRecipe(release.offline)
    if not engine.image_id(recipe.rootfs_image):  # the offline base's first step, gone since
        from builder.base import make_rootfs

        with tempfile.TemporaryDirectory(prefix="builder-rootfs-") as tmp:
            make_rootfs(engine, recipe, settings.apt_mirror, Path(tmp))
    image_id = build(engine, release, variant, options, devel, settings, log_path, quiet,
                     {"BUILD_ID": build_id, **b.provenance_args()})
    found = toolchain_found(engine, image_id)
    if found:
        raise BuildError(f"the runtime image holds a compiler toolchain: {', '.join(found)}",
                         step="read-back check", log_path=log_path)
    devel_labels = dict(engine.inspect(devel)["Config"].get("Labels") or {})
    library = _extension_library(engine, devel)
    if library and _digest(engine, devel, library) != _digest(engine, image_id, library):
        raise BuildError(f"the runtime image's {library} is not the devel image's", step="read-back check",
                         log_path=log_path)
    # the coverage is the devel image's: the same CUDA binaries (the extension checked above;
    # TensorFlow's come from the same locked wheel), and no cuobjdump here to list them
    meta = {**meta, "base_image": recipe.rootfs_image}  # what it stands on
    labelled = b.verify_and_label(engine, image_id, release, variant, meta, log_path, expect_extension=bool(library),
                                  compression=settings.compression, coverage=False,
                                  extra_labels={Label.COVERAGE: devel_labels.get(Label.COVERAGE, "")})
    refs = refs_for(devel_refs)
    for ref in refs:
        engine.tag(labelled, ref)
    return refs


def _extension_library(engine: Engine, image: str) -> str | None:
    code, out = engine.run_capture(image, ["python3", "-c", "import tfext.sysconfig as s; print(s.get_library())"],
                                   stdout_only=True, timeout=300)
    return out.strip().splitlines()[-1] if code == 0 and out.strip() else None


def _digest(engine: Engine, image: str, path: str) -> str:
    code, out = engine.run_capture(image, ["sha256sum", path], stdout_only=True, timeout=120)
    return out.split()[0] if code == 0 and out.split() else f"unreadable ({code})"
