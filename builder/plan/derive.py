"""`builder derive`: an image FROM a built one, with patches applied and the framework
rebuilt by the parent's own nvbuild.sh, and/or extra packages. Patches are tried on the
parent's source in a throwaway container before anything is built.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from builder.engine import Runs

from builder import components
from builder.catalog import lock, lock_resolve
from builder.core import grammar
from builder.core.contract import InImage, Label
from builder.core.errors import PatchError, UserError
from builder.core.userfiles import MAX_PATCH, read_user_bytes, shown
from builder.in_image import cuda_arch
from builder.render.job import Expectation, FilesContext, ImageJob
from builder.render.templating import template_env


@dataclass
class DeriveSpec:
    parent: str
    patches: list[Path] = field(default_factory=list)
    # builder/components/ compiled from a source they patch: NAME -> patches (--NAME-patch)
    component_patches: dict[str, list[Path]] = field(default_factory=dict)
    apt: list[str] = field(default_factory=list)
    pip: list[str] = field(default_factory=list)
    nvbuild_args: list[str] = field(default_factory=list)

    def validate(self) -> None:
        unknown = sorted(set(self.component_patches) - set(patchable()))
        if unknown:
            raise UserError(f"no component {unknown[0]!r} takes patches (those that do: {', '.join(patchable())})")
        if not (self.patches or self.apt or self.pip or self.nvbuild_args) and not any(self.component_patches.values()):
            options = ", ".join(["--patch", *(f"--{n}-patch" for n in patchable()), "--apt", "--pip"])
            raise UserError(f"nothing to derive: give {options} or --nvbuild-args")
        names: set[str] = set()
        for option, patches in ((f"--{n}-patch", p) for n, p in sorted(self.component_patches.items())):
            for p in patches:  # joined to a directory nvbuild.sh applies *.patch from, in name order
                _refuse_empty(p, option)  # read (and so checked) first: no such file, a fifo, too big
                if not (grammar.FILE_NAME.fullmatch(p.name) and p.name.endswith(".patch")):
                    raise UserError(
                        f"{option} {shown(p)}: name it NAME.patch with letters, digits, '.', '_', '+' and '-'"
                    )
        for p in self.patches:
            _refuse_empty(p, "--patch")
            if p.name in names:
                raise UserError(f"--patch {shown(p)}: two patches are named {shown(p.name)}")
            names.add(p.name)
            if not grammar.FILE_NAME.fullmatch(p.name):
                raise UserError(f"--patch {shown(p)}: use a file name of letters, digits, '.', '_', '+' and '-'")
        for pkg in self.apt:
            if not grammar.APT_NAME.fullmatch(pkg):
                raise UserError(f"--apt {grammar.printable(pkg)} is not a Debian package name[=version]")
        for pkg in self.pip:
            if not grammar.PIP_SPEC.fullmatch(pkg):
                raise UserError(f"--pip {grammar.printable(pkg)} is not a pip requirement (name[extras][==version])")
        for arg in self.nvbuild_args:
            if not grammar.TEXT.fullmatch(arg):
                raise UserError(
                    f"--nvbuild-args: {grammar.printable(arg)} holds a control character or undecodable bytes"
                )
        check_nvbuild_args(self.nvbuild_args)

    @property
    def sm(self) -> str | None:
        """The --sm list given in --nvbuild-args, if any (the last one counts, as in nvbuild.sh)."""
        return dict(nvbuild_options(self.nvbuild_args)).get("--sm")


def read_patch(path: Path, option: str = "--patch") -> bytes:
    """A patch file's bytes, through the one reader of users' files (a regular file of at
    most 64 MiB: a fifo or a device is refused, never waited on or read without end)."""
    return read_user_bytes(path, option, MAX_PATCH)


def _refuse_empty(path: Path, option: str) -> None:
    """An empty (or blank) patch changes nothing but would still rebuild and be recorded."""
    if not read_patch(path, option).strip():
        raise UserError(f"{option} {shown(path)}: the patch is empty")


# nvbuild.sh's options (see its usage): those taking a value, and plain flags.
NVBUILD_VALUE_OPTIONS = ("--sm", "--only")
NVBUILD_FLAGS = ("--noclean", "--clean", "--v1", "--v2", "--allow-ptx-jit")


def nvbuild_options(args: list[str]) -> list[tuple[str, str]]:
    """(option, value) pairs of nvbuild.sh arguments; unknown options are refused here,
    before anything is built, instead of by nvbuild.sh after the parent was pulled apart."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg in ("--configonly", "-h", "--help"):
            raise UserError(f"--nvbuild-args: {arg!r} would not build the framework")
        if name == "--cache":
            raise UserError(
                "--nvbuild-args: give the compile cache as --compile-cache URL "
                "(an URL in --nvbuild-args would be kept in the image's history)"
            )
        if name in NVBUILD_VALUE_OPTIONS:
            if not eq:
                if i + 1 >= len(args):
                    raise UserError(f"--nvbuild-args: {name} needs a value")
                i += 1
                value = args[i]
            out.append((name, value))
        elif arg in NVBUILD_FLAGS or (
            arg.startswith("--python") and grammar.PYTHON_VERSION.fullmatch(arg[len("--python") :])
        ):
            out.append((arg, ""))
        else:
            known = ", ".join(NVBUILD_VALUE_OPTIONS + NVBUILD_FLAGS + ("--python3.X",))
            raise UserError(f"--nvbuild-args: unknown nvbuild.sh option {arg!r} (known: {known})")
        i += 1
    return out


def check_nvbuild_args(args: list[str]) -> None:
    for name, value in nvbuild_options(args):
        steps = ("extension", *components.compiled())
        if name == "--only" and value not in steps:
            raise UserError(f"--nvbuild-args: --only {value!r}: expected {', '.join(repr(s) for s in steps)}")
        if name == "--sm" and value not in ("all", "local"):
            try:
                archs = cuda_arch.parse(value)
            except cuda_arch.ArchError as exc:
                raise UserError(f"--nvbuild-args --sm: {exc}") from None
            known = {f"{m}.{n}" for m, n in cuda_arch.KNOWN_ARCHS}
            unknown = [a for a in archs if a not in known]
            if unknown:
                raise UserError(
                    f"--nvbuild-args --sm: compute capability {', '.join(unknown)} is not a GPU architecture"
                )


def parent_cuda(info: dict) -> str | None:
    """The CUDA toolkit of a parent image: what the builder measured (label), else the
    CUDA_VERSION its base declares; None when it says neither."""
    labels = dict(info.get("Config", {}).get("Labels") or {})
    env = dict(e.split("=", 1) for e in info.get("Config", {}).get("Env") or [] if "=" in e)
    for value in (labels.get(Label.CUDA), env.get("CUDA_VERSION")):
        if value and re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)*", value):
            return value
    return None


def check_parent_is_devel(parent: str, labels: dict) -> None:
    """A runtime image has no compiler and no cuobjdump: nothing can be rebuilt or read back
    in it. Derived images start from the devel image it was copied from."""
    devel = labels.get(Label.RUNTIME_OF)
    if devel:
        raise UserError(
            f"--from {parent} is a runtime image (no compiler, no CUDA toolkit): derive from its devel image, {devel}"
        )


def parent_ptxas(labels: dict) -> str | None:
    """The newer ptxas the parent's nvbuild.sh assembles with, as its label says (set by
    the build from the release's locked cuda_nvcc wheel); None for an image without the
    label (built before nvbuild.sh could assemble, or without such a ptxas)."""
    return labels.get(Label.PTXAS) or None


def check_capabilities(spec: DeriveSpec, parent: str, info: dict) -> None:
    """--sm against the parent's CUDA: what its nvcc (or the newer ptxas beside it) cannot
    compile is refused now."""
    sm = spec.sm
    cuda = parent_cuda(info)
    if not sm or sm in ("all", "local") or not cuda:
        return
    ptxas = parent_ptxas(dict(info.get("Config", {}).get("Labels") or {}))
    problems = cuda_arch.check(cuda_arch.parse(sm), cuda, "--allow-ptx-jit" in spec.nvbuild_args, ptxas=ptxas)
    if problems:
        raise UserError(f"--nvbuild-args --sm: {problems[0]} (the CUDA of {parent})")


def parse_nvbuild_args(text: str | None) -> list[str]:
    try:
        return shlex.split(text or "")
    except ValueError as exc:
        raise UserError(f"--nvbuild-args: {exc}") from None


def patch_records(patches: list[Path]) -> list[dict]:
    return [{"name": p.name, "sha256": hashlib.sha256(read_patch(p)).hexdigest()} for p in patches]


def check_patches(
    engine: Runs,
    parent: str,
    patches: list[Path],
    source: str = InImage.SOURCE,
    setup: str = "",
    shown: str | None = None,
) -> None:
    """Apply the patches, in order, to the parent's source in a throwaway container."""
    if not patches:
        return
    with tempfile.TemporaryDirectory(prefix="builder-patches-") as tmp:
        for p in patches:
            (Path(tmp) / p.name).write_bytes(read_patch(p))
        script = (
            f'{setup}cd {source} || exit 3; for p in "$@"; do '
            'out=$(patch -p1 --forward --batch < "/patches/$p" 2>&1); rc=$?; '
            'if [ $rc != 0 ]; then echo "FAILED $p"; echo "$out"; '
            'for r in $(find . -name \'*.rej\'); do echo "--- rejected hunks in ${r%.rej}:"; cat "$r"; done; '
            "exit 10; fi; done; echo ALL-APPLIED"
        )
        code, output = engine.run_capture(
            parent, ["bash", "-c", script, "check", *[p.name for p in patches]], binds={tmp: "/patches"}
        )
    if code == 3:
        raise UserError(f"{parent} has no {shown or source} to patch")
    if code != 0 or "ALL-APPLIED" not in output:
        m = re.search(r"^FAILED (\S+)", output, re.M)
        name = m.group(1) if m else "a patch"
        hunks = re.findall(r"Hunk #\d+ FAILED at \d+", output)
        detail = output.split("\n", 1)[1] if m else output
        raise PatchError(
            f"patch {name} does not apply to the source in {parent}" + (f": {', '.join(hunks)}" if hunks else ""),
            detail.strip(),
        )


def resolve_pip(engine: Runs, spec: DeriveSpec, parent: str, labels: dict, index_url: str | None) -> tuple[str, str]:
    """--pip resolved against the parent's pins (its PIP_CONSTRAINT file) before anything is
    built: (the hashed requirements the derived image installs, the parent's pins), or a
    one-line refusal."""
    if not spec.pip:
        return "", ""
    code, constraints = engine.run_capture(parent, ["cat", InImage.PIP_CONSTRAINT], stdout_only=True)
    if code != 0:
        raise UserError(
            f"--pip: {parent} has no {InImage.PIP_CONSTRAINT} (built before images pinned their "
            "packages): rebuild it with this builder"
        )
    python = ".".join((labels.get(Label.PYTHON) or "").split(".")[:2])
    if not re.fullmatch(r"3\.[0-9]+", python):
        raise UserError(f"--pip: {parent} has no {Label.PYTHON} label: derive from an image the builder built")
    return lock_resolve.resolve_beside(
        spec.pip, python, constraints, f"--pip {' '.join(spec.pip)} beside the pins of {parent}", index_url
    ), constraints


def new_pins(resolved: str, constraints: str) -> list[str]:
    """name==version of what RESOLVED adds or would move (nothing moves: uv kept the pins)."""
    pinned = set(re.findall(r"^([a-z0-9-]+==\S+)$", constraints, re.M))
    found = lock.entries(resolved)
    return [f"{n}=={v}" for n, (v, _) in sorted(found.items()) if f"{n}=={v}" not in pinned]


def check_patches_on_top(engine: Runs, parent: str, patches: list[Path], source: str, shipped: str) -> None:
    """Patches to a pristine sdist nvbuild.sh patches (Horovod, DALI's plugin) apply on top
    of the ones the parent already ships there, as in nvbuild.sh."""
    setup = (
        f"[ -d {source} ] || exit 3; cp -r {source} /tmp/sdist-check "
        f'&& for s in {shipped}/*.patch; do [ -e "$s" ] || continue; '
        '(cd /tmp/sdist-check && patch -p1 --forward --batch -s < "$s") || exit 4; done; '
    )
    check_patches(engine, parent, patches, source="/tmp/sdist-check", setup=setup, shown=source)


def check_component_patches(engine: Runs, parent: str, patches: dict[str, list[Path]]) -> None:
    for name, given in sorted(patches.items()):
        if given:
            component = components.get(name)
            check_patches_on_top(engine, parent, given, component.SOURCE, component.patches_in_image())


def patchable() -> tuple[str, ...]:
    """The components `builder derive --NAME-patch` patches."""
    return tuple(c.NAME for c in components.REGISTRY if c.patchable())


def _label_capabilities(spec: DeriveSpec, parent_labels: dict) -> str | None:
    """The capabilities this derive's --sm compiles, as the image's env and label say
    them; None when it gives no explicit list."""
    sm = spec.sm
    if not sm or sm in ("all", "local"):
        return None
    try:
        archs = cuda_arch.parse(sm)
        cuda = parent_labels.get(Label.CUDA)
        if "--allow-ptx-jit" in spec.nvbuild_args and cuda and archs != "local":
            archs = cuda_arch.compiled(archs, cuda, parent_ptxas(parent_labels))  # what nvbuild.sh will compile
        return ",".join(archs)
    except cuda_arch.ArchError as exc:
        raise UserError(f"--nvbuild-args --sm: {exc}") from None


def render(spec: DeriveSpec, parent_ref: str, parent_id: str, parent_labels: dict, added: Sequence[str] = ()) -> str:
    """The derived Dockerfile: a pure function of the spec and what the parent says."""
    cuda_cc = _label_capabilities(spec, parent_labels)
    records = patch_records(spec.patches)
    component_records = {n: patch_records(p) for n, p in sorted(spec.component_patches.items()) if p}
    previous = json.loads(parent_labels.get(Label.PATCHES) or "[]")
    labels = {
        Label.PARENT: parent_ref,
        Label.PARENT_ID: parent_id,
        Label.PATCHES: json.dumps(previous + records, separators=(",", ":")),
        **{
            components.get(n).patches_label(): json.dumps(
                json.loads(parent_labels.get(components.get(n).patches_label()) or "[]") + records,
                separators=(",", ":"),
            )
            for n, records in component_records.items()
        },
        Label.APT_PACKAGES: " ".join(spec.apt),
        Label.PIP_PACKAGES: " ".join(spec.pip),
        Label.PIP_ADDED: " ".join(added),
        Label.NVBUILD_ARGS: " ".join(spec.nvbuild_args),
    }
    if cuda_cc:
        labels[Label.CUDA_COMPUTE_CAPABILITIES] = cuda_cc
    d = SimpleNamespace(
        parent_ref=parent_ref,
        patches=records,
        component_patches=[
            (n, components.get(n).patches_in_image(), records) for n, records in component_records.items()
        ],
        rebuild=bool(spec.patches or component_records or spec.nvbuild_args),
        nvbuild_args=spec.nvbuild_args,
        cuda_cc=cuda_cc,
        apt=spec.apt,
        pip=spec.pip,
        labels=labels,
    )
    return template_env().get_template("derived/Dockerfile.j2").render(d=d)


def job(
    spec: DeriveSpec,
    parent_ref: str,
    info: dict,
    catalog,
    tag: str,
    log_name: str,
    compile_cache: str | None,
    no_cache: bool,
    test: bool = True,
    resolved: str = "",
    constraints: str = "",
) -> ImageJob:
    """The derived image's job: its Dockerfile rendered from the spec and what the parent
    (INFO, its engine's inspect) says; the read-back expects what the parent's labels say it
    was built with, with this derive's own --sm where it gives one."""
    labels = dict(info["Config"].get("Labels") or {})
    dockerfile = render(spec, parent_ref, info["Id"], labels, new_pins(resolved, constraints) if resolved else [])
    try:
        release = catalog.get(labels[Label.RELEASE])
        variant = release.variant(labels[Label.VARIANT])
    except KeyError:
        raise UserError(
            f"--from {parent_ref} has no release and variant labels: derive from an image the builder built"
        ) from None
    caps = _label_capabilities(spec, labels) or labels.get(Label.CUDA_COMPUTE_CAPABILITIES, "")
    expect = Expectation(
        release,
        variant,
        () if caps in ("", "local") else tuple(a for a in caps.split(",") if a),
        {t: labels.get(key) == "1" for t, key in (("xla", Label.XLA), ("gcp", Label.GCP), ("hdfs", Label.HDFS))},
        extension=bool(labels.get(Label.EXTENSION)),
        conformance=test,
        # the parent's components stay (its labels say which it holds)
        components=tuple(c.NAME for c in components.REGISTRY if labels.get(c.LABEL)),
    )
    blobs = {
        f"{folder}/{p.name}": read_patch(p, option)
        for folder, option, patches in (
            ("patches", "--patch", spec.patches),
            *((f"{n}-patches", f"--{n}-patch", p) for n, p in sorted(spec.component_patches.items())),
        )
        for p in patches
    }
    texts = {"Dockerfile": dockerfile, **({"pip-requirements.txt": resolved} if resolved else {})}
    return ImageJob(
        "derive",
        FilesContext(texts, blobs=blobs),
        log_name,
        {"BASE_IMAGE": parent_ref, "COMPILE_CACHE": compile_cache or ""},
        compile_cache,
        cache_key=log_name.removesuffix(".log"),
        nocache=no_cache,
        expect=expect,
        refs=(tag,),
    )
