"""The runtime image of a release variant (`builder build --runtime`): the `runtime` stage
of the variant's layered Dockerfile (templates/Dockerfile.j2): the base, Python and the
locked wheels (the `core` stage the devel image stands on too, layer for layer) plus what
nvbuild.sh built, its entrypoint, examples, environment and labels, without the compiler
toolchain or the CUDA toolkit. Built after the devel image from the same context, so
every shared step is the devel build's own (BuildKit's cache), read back and checked like
it, then tagged `<tag>-runtime`.

Only a release whose every CUDA library TensorFlow loads comes from NVIDIA's wheels can
have one (26.11): the older releases load cuBLAS, cuFFT, ... from the base's toolkit.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from builder import buildcontext, buildsettings
from builder.base_recipe import RUNTIME_WHEELS
from builder.catalog import Release, Variant
from builder.contract import Label
from builder.engine import BuildRequest, Engine, Progress
from builder.errors import BuildError
from builder.render import Rendered, RenderOptions, render

# what a runtime image must not hold (found on PATH in a container of it)
TOOLCHAIN = ("nvcc", "gcc", "g++", "cc", "c++", "make", "cuobjdump")
SUFFIX = "-runtime"
STAGE = "runtime"


def refusal(release: Release) -> str | None:
    missing = [w for w in RUNTIME_WHEELS if w not in release.gpu_wheels]
    if missing:
        return (f"release {release.name} has no runtime image: TensorFlow loads its {', '.join(missing)} "
                "from the base's CUDA toolkit, not from NVIDIA's wheels (26.11 has them all)")
    return None


def refs_for(devel_refs: list[str]) -> list[str]:
    return [f"{ref}{SUFFIX}" for ref in devel_refs]


def build(engine: Engine, rendered: Rendered, framework_src: Path | None, settings: buildsettings.BuildSettings,
          log_path: Path, quiet: bool, buildargs: dict[str, str], devel_image: str | None,
          nocache: bool = False) -> str:
    """Build the runtime stage of RENDERED (the devel image's own render) untagged; returns
    its id. BUILDARGS are the devel build's, so core's steps come from its cache (and its
    layers are shared); on BuildKit the devel stage is DEVEL_IMAGE itself (a named build
    context), so a cache pruned in between never compiles the extension again."""
    with tempfile.TemporaryDirectory(prefix="builder-runtime-") as tmp:
        context = buildcontext.write(rendered, Path(tmp) / "context", framework_src)
        with buildsettings.deliver(settings, engine.backend) as delivery:
            args = {**buildargs, "BUILD_SETTINGS": delivery.url or ""}
            request = BuildRequest(context=context, buildargs=args, nocache=nocache,
                                   network_mode=delivery.network_mode(buildargs.get("COMPILE_CACHE") or None),
                                   log_path=log_path, quiet=quiet, secrets=delivery.secrets, builder=settings.builder,
                                   compression=settings.compression, target=STAGE,
                                   contexts=_devel_context(engine, settings, devel_image))
            label = f"{rendered.release}/{rendered.variant} runtime"
            return engine.build(request, Progress(label, quiet=quiet)).image_id


def _devel_context(engine: Engine, settings: buildsettings.BuildSettings, devel_image: str | None) -> dict[str, str]:
    """The devel stage as the image just built, where the backend can say so: BuildKit on
    the engine's own builder (another builder would have to be handed the image first)."""
    if engine.backend != "buildkit" or settings.builder or devel_image is None:
        return {}
    return {"devel": f"docker-image://{devel_image}"}


def toolchain_found(engine: Engine, image: str) -> list[str]:
    """The compilers and CUDA tools on the image's PATH (none, in a runtime image)."""
    script = "for t in " + " ".join(TOOLCHAIN) + "; do command -v \"$t\" || true; done"
    code, out = engine.run_capture(image, ["/bin/sh", "-c", script], stdout_only=True, timeout=120)
    if code != 0:
        raise BuildError(f"{image}: could not look for a compiler in the runtime image (exit {code})",
                         step="read-back check")
    return [line for line in out.split() if line]


def make(engine: Engine, release: Release, variant: Variant, options: RenderOptions, devel_refs: list[str],
         base, build_id: str, framework_src: Path | None, settings: buildsettings.BuildSettings, quiet: bool,
         compile_cache: str | None = None, devel_exported: bool = True, nocache: bool = False) -> list[str]:
    """The runtime image of a devel image just built on BASE (a build.BaseChoice) and tagged
    DEVEL_REFS: its runtime stage built from the same render, checked (no compiler; what it
    reports matches the catalog like the devel image; the extension is the devel image's
    file, by digest), labelled, then tagged `<ref>-runtime`. Without DEVEL_EXPORTED
    (--runtime-only) the devel stage is built inside this build and never exported: the
    checks against the devel image and its coverage label are left out (DEVEL_REFS are the
    tags it would have: the runtime-of label names the first)."""
    from builder import build as b, paths  # build imports render, which this module's users import first

    rendered = render(release, variant, b.options_for(options, release, base))  # as the devel image's
    base_image = base.image
    log_path = paths.logs_dir() / f"{release.name}-{variant.name}-{build_id}{SUFFIX}.log"
    devel = devel_refs[0]
    args = {"BASE_IMAGE": base_image, "BUILD_ID": build_id, "DEVEL_IMAGE": devel,
            "COMPILE_CACHE": compile_cache or "", **b.provenance_args()}
    image_id = build(engine, rendered, framework_src, settings, log_path, quiet, args, devel if devel_exported else None,
                     nocache)
    found = toolchain_found(engine, image_id)
    if found:
        raise BuildError(f"the runtime image holds a compiler toolchain: {', '.join(found)}",
                         step="read-back check", log_path=log_path)
    devel_labels: dict[str, str] = {}
    if devel_exported:
        devel_labels = dict(engine.inspect(devel)["Config"].get("Labels") or {})
        library = _extension_library(engine, devel)
        if library and _digest(engine, devel, library) != _digest(engine, image_id, library):
            raise BuildError(f"the runtime image's {library} is not the devel image's", step="read-back check",
                             log_path=log_path)
        expect_extension = bool(library)
    else:  # what the devel image's read-back would expect
        expect_extension = b.has_extension(framework_src)
    # the coverage is the devel image's: the same CUDA binaries (the extension checked above;
    # TensorFlow's come from the same locked wheel), and no cuobjdump here to list them
    labelled = b.verify_and_label(engine, image_id, release, variant, rendered.meta, log_path,
                                  expect_extension=expect_extension,
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
