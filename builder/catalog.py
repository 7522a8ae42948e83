"""The release catalog: YAML files, one per release, resolved through `parent`
inheritance and validated as a whole before anything else happens.

A child states only what differs: mappings merge key by key, any other value
(lists included) replaces the parent's, and `null` removes the parent's key (so a
release can drop a variant). Every problem is collected with its file and key path
and raised together as one CatalogError.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from builder import cuda_arch
from builder.errors import CatalogError, Problem

RELEASES_DIR = Path(__file__).parent / "releases"
# Whole-string patterns: use them with fullmatch (they also end in \Z, so that `.match`
# elsewhere cannot accept a trailing newline the way `$` does).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
VARIANT_NAME = re.compile(r"[a-z0-9][a-z0-9.-]*\Z")
# Docker tag grammar: up to 128 of [A-Za-z0-9_.-], not starting with . or -.
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
# PyPI distribution names (PEP 508) and public PEP 440 versions, as pins write them.
PACKAGE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
VERSION = r"(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
PIN = re.compile(rf"({PACKAGE_NAME.pattern})==({VERSION})")
# A requirement without a marker: a name, optionally with version bounds ("cffi>=1.4.0").
SPECIFIER = rf"(?:===?|~=|!=|<=?|>=?)\s*{VERSION}(?:\.\*)?"
REQUIREMENT = re.compile(rf"({PACKAGE_NAME.pattern})(?:\s*{SPECIFIER}(?:\s*,\s*{SPECIFIER})*)?")
PYTHON_VERSION = re.compile(r"3\.[0-9]{1,2}")
COMPONENT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
DEBIAN_SUITES = {"bullseye": "11", "bookworm": "12", "trixie": "13"}

# Allowed keys at each level; anything else is reported (a typo must not pass silently).
TOP_KEYS = {"release", "abstract", "parent", "repository", "os", "python", "cuda", "components",
            "base", "build", "env", "labels", "expose", "entrypoint", "variants", "gpu_wheels", "horovod"}
BUILD_KEYS = {"cuda_compute_capabilities", "xla", "gcp", "hdfs", "nvbuildopts"}
VARIANT_KEYS = {"tag", "framework", "env", "labels"}
FRAMEWORK_KEYS = {"name", "version", "api", "package", "pythons", "pins"}
HOROVOD_KEYS = {"version", "requires"}
ENTRYPOINT_KEYS = {"title", "copyright_holder", "upstream_copyright", "shm_recommend"}
TOGGLES = ("xla", "gcp", "hdfs")


@dataclass(frozen=True)
class OfflineBase:
    debian: str
    cuda: str
    python: str


def canonical_name(name: str) -> str:
    """PEP 503 normalized distribution name: 'Typing_Extensions' -> 'typing-extensions'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def python_key(version: str) -> tuple[int, ...]:
    """Sort key for "3.9" < "3.10"."""
    return tuple(int(p) for p in version.split("."))


@dataclass(frozen=True)
class HorovodSpec:
    """Horovod built from its sdist in the image; `requires` are its install_requires,
    locked with the framework (the build runs without build isolation)."""

    version: str
    requires: tuple[str, ...]


@dataclass(frozen=True)
class Variant:
    name: str
    tag: str
    framework_name: str
    framework_version: str
    api: int
    env: dict[str, str]
    labels: dict[str, str]
    # The upstream wheel: its pip distribution (None: the catalog names none), the Pythons
    # it is published for, and the known-good exact pins installed with it.
    package: str | None = None
    pythons: tuple[str, ...] = ()
    pins: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        """'tf2' for 'tf2-py3': the variant as NGC's release string spells it."""
        return self.name.split("-")[0]


@dataclass(frozen=True)
class Release:
    name: str
    file: str
    parent: str | None
    repository: str
    os_distro: str
    os_version: str
    python: str
    cuda: str
    components: dict[str, str]
    upstream_image: str
    upstream_digest: str | None
    offline: OfflineBase
    cuda_cc: list[str]
    toggles: dict[str, bool]
    nvbuildopts: list[str]
    env: dict[str, str]
    labels: dict[str, str]
    expose: list[int]
    entrypoint: dict[str, str]
    variants: dict[str, Variant]
    resolved: dict[str, Any] = field(repr=False, compare=False)
    # component -> exact pip requirement of NVIDIA's PyPI wheel ("nvidia-cudnn-cu11==8.5.0.96")
    gpu_wheels: dict[str, str] = field(default_factory=dict)
    horovod: HorovodSpec | None = None

    def variant(self, name: str) -> Variant:
        from builder.errors import UserError

        if name not in self.variants:
            raise UserError(f"release {self.name} has no variant '{name}' "
                            f"(it has: {', '.join(self.variants)})")
        return self.variants[name]

    @property
    def upstream_ref(self) -> str:
        return f"{self.upstream_image}@{self.upstream_digest}" if self.upstream_digest else self.upstream_image


@dataclass
class Catalog:
    releases: dict[str, Release]

    def get(self, name: str) -> Release:
        from builder.errors import UserError

        if name not in self.releases:
            raise UserError(f"unknown release '{name}' (known: {', '.join(self.releases)})")
        return self.releases[name]


def merge(parent: Any, child: Any) -> Any:
    """Deep merge for inheritance: mappings merge, `None` deletes, the rest replaces."""
    if isinstance(parent, dict) and isinstance(child, dict):
        out = dict(parent)
        for key, value in child.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge(parent.get(key), value)
        return out
    return child


def _read_files(directory: Path, problems: list[Problem]) -> dict[str, tuple[str, dict]]:
    raw: dict[str, tuple[str, dict]] = {}
    for path in sorted(directory.glob("*.yaml")):
        name = path.name
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f"line {mark.line + 1}: " if mark is not None else ""
            reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            problems.append(Problem(name, "", f"{line}malformed YAML: {reason}"))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem(name, "", f"cannot read: {exc}"))
            continue
        if not isinstance(data, dict):
            problems.append(Problem(name, "", "must be a mapping of keys to values"))
            continue
        rel = data.get("release")
        if not isinstance(rel, (str, int, float)) or isinstance(rel, bool) or str(rel) == "":
            problems.append(Problem(name, "release", "missing required field (the release name, e.g. \"21.08\")"))
            continue
        if isinstance(rel, float):  # YAML reads 21.10 as 21.1: demand a quoted string
            problems.append(Problem(name, "release", f"write the release name as a quoted string, e.g. \"{rel}\""))
            continue
        rel = str(rel)
        if rel in raw:
            problems.append(Problem(name, "release", f"release '{rel}' is already defined in {raw[rel][0]}"))
            continue
        raw[rel] = (name, data)
    return raw


def _resolve(rel: str, raw: dict[str, tuple[str, dict]], problems: list[Problem],
             done: dict[str, dict | None], chain: tuple[str, ...] = ()) -> dict | None:
    """The release's data merged over all its ancestors, or None when the chain is broken."""
    if rel in done:
        return done[rel]
    file, data = raw[rel]
    if rel in chain:
        problems.append(Problem(file, "parent", f"inheritance cycle: {' -> '.join(chain + (rel,))}"))
        return None
    parent = data.get("parent")
    if parent is None:
        merged: dict | None = dict(data)
    else:
        parent = str(parent)
        if parent not in raw:
            problems.append(Problem(file, "parent", f"unknown parent '{parent}'"))
            merged = None
        else:
            base = _resolve(parent, raw, problems, done, chain + (rel,))
            if base is None:
                merged = None
            else:
                base = {k: v for k, v in base.items() if k not in ("abstract", "release", "parent")}
                merged = merge(base, data)
    done[rel] = merged
    return merged


class _Checker:
    """Typed access into one release's resolved data, recording problems by key path."""

    def __init__(self, file: str, data: dict, problems: list[Problem]):
        self.file, self.data, self.problems = file, data, problems

    def add(self, key: str, message: str) -> None:
        self.problems.append(Problem(self.file, key, message))

    def get(self, key: str) -> Any:
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def required(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            self.add(key, "missing required field")
        return value

    def string(self, key: str, required: bool = True) -> str | None:
        value = self.required(key) if required else self.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self.add(key, f"must be a string, got {type(value).__name__} {value!r}")
            return None
        if isinstance(value, float):
            self.add(key, f"write versions as quoted strings, e.g. \"{value}\"")
            return None
        return str(value)

    def mapping(self, key: str, allowed: set[str] | None = None) -> dict:
        value = self.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.add(key, f"must be a mapping, got {type(value).__name__}")
            return {}
        if allowed is not None:
            for k in value:
                if k not in allowed:
                    self.add(f"{key}.{k}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
        return value

    def boolean(self, key: str) -> bool:
        value = self.required(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            self.add(key, f"must be a boolean (true or false), got {value!r}")
            return False
        return value

    def string_map(self, key: str, check_names: bool = False) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in self.mapping(key).items():
            where = f"{key}.{name}"
            if check_names and not (isinstance(name, str) and ENV_NAME.fullmatch(name)):
                self.add(where, f"'{name}' is not a valid environment variable name")
                continue
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                self.add(where, f"must be a string or integer, got {type(value).__name__} {value!r}")
                continue
            out[str(name)] = str(value)
        return out


def _check_release(rel: str, file: str, data: dict, problems: list[Problem]) -> Release | None:
    before = len(problems)
    c = _Checker(file, data, problems)
    for k in data:
        if k not in TOP_KEYS:
            c.add(str(k), f"unknown key (allowed: {', '.join(sorted(TOP_KEYS))})")
    repository = c.string("repository") or ""
    if repository and not re.fullmatch(r"[a-z0-9]+([._/:-][a-z0-9]+)*", repository):
        c.add("repository", f"'{repository}' is not a valid image repository name")
    c.mapping("os", {"distro", "version"})
    distro, os_version = c.string("os.distro"), c.string("os.version")
    python = c.string("python")
    if python is not None and not PYTHON_VERSION.fullmatch(python):
        c.add("python", f"'{python}' is not a Python version such as \"3.9\"")
    cuda = c.string("cuda")
    if cuda is not None:
        try:
            cuda_arch.supported_archs(cuda)
        except cuda_arch.ArchError as exc:
            c.add("cuda", str(exc))
            cuda = None
    components = c.string_map("components")
    c.mapping("base", {"upstream", "offline"})
    c.mapping("base.upstream", {"image", "digest"})
    upstream = c.string("base.upstream.image")
    digest = c.string("base.upstream.digest", required=False)
    if digest is not None and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        c.add("base.upstream.digest", "must be sha256:<64 hex digits>")
    c.mapping("base.offline", {"debian", "cuda", "python"})
    suite = c.string("base.offline.debian")
    if suite is not None and suite not in DEBIAN_SUITES:
        c.add("base.offline.debian", f"unknown Debian suite '{suite}' (known: {', '.join(DEBIAN_SUITES)})")
    off_cuda, off_python = c.string("base.offline.cuda"), c.string("base.offline.python")
    if off_python is not None and not PYTHON_VERSION.fullmatch(off_python):
        c.add("base.offline.python", f"'{off_python}' is not a Python version such as \"3.9\"")

    build = c.mapping("build", BUILD_KEYS)
    toggles = {t: c.boolean(f"build.{t}") for t in TOGGLES}
    cc_raw = c.required("build.cuda_compute_capabilities")
    cc: list[str] = []
    if cc_raw is not None:
        if not isinstance(cc_raw, list) or not cc_raw:
            c.add("build.cuda_compute_capabilities", "must be a non-empty list such as [\"7.0\", \"8.0\"]")
        else:
            try:
                parsed = cuda_arch.parse([str(x) for x in cc_raw])
                cc = list(parsed) if isinstance(parsed, list) else []
            except cuda_arch.ArchError as exc:
                c.add("build.cuda_compute_capabilities", str(exc))
            for toolkit, where in ((cuda, "cuda"), (off_cuda, "base.offline.cuda")):
                if cc and toolkit:
                    try:
                        for msg in cuda_arch.check(cc, toolkit):
                            c.add("build.cuda_compute_capabilities", f"{msg} (from {where})")
                    except cuda_arch.ArchError as exc:
                        c.add(where, str(exc))
    nvbuildopts = build.get("nvbuildopts", [])
    if not isinstance(nvbuildopts, list) or not all(isinstance(x, str) for x in nvbuildopts):
        c.add("build.nvbuildopts", "must be a list of strings")
        nvbuildopts = []

    env = c.string_map("env", check_names=True)
    labels = c.string_map("labels")
    expose = data.get("expose", [])
    if not isinstance(expose, list) or not all(isinstance(p, int) and not isinstance(p, bool)
                                               and 0 < p < 65536 for p in expose):
        c.add("expose", "must be a list of port numbers")
        expose = []
    c.mapping("entrypoint", ENTRYPOINT_KEYS)
    entrypoint = {k: c.string(f"entrypoint.{k}") or "" for k in sorted(ENTRYPOINT_KEYS)}

    variants: dict[str, Variant] = {}
    vdata = c.mapping("variants")
    if not vdata:
        c.add("variants", "missing required field (at least one variant)")
    for vname, vraw in vdata.items():
        key = f"variants.{vname}"
        if not isinstance(vname, str) or not VARIANT_NAME.fullmatch(vname):
            c.add(key, "variant names are lower-case letters, digits, '.' and '-'")
            continue
        c.mapping(key, VARIANT_KEYS)
        c.mapping(f"{key}.framework", FRAMEWORK_KEYS)
        fname = c.string(f"{key}.framework.name")
        fversion = c.string(f"{key}.framework.version")
        api = c.required(f"{key}.framework.api")
        if api is not None and api not in (1, 2):
            c.add(f"{key}.framework.api", f"must be 1 or 2, got {api!r}")
        tag = c.string(f"{key}.tag", required=False) or f"{rel}-{vname}"
        if not TAG.fullmatch(tag):
            c.add(f"{key}.tag", f"'{tag}' is not a valid image tag")
        if fversion is not None and not re.fullmatch(VERSION, fversion):
            c.add(f"{key}.framework.version", f"'{fversion}' is not a version such as \"2.5.0\"")
        package, pythons, pins = _check_wheel(c, f"{key}.framework")
        venv = c.string_map(f"{key}.env", check_names=True)
        vlabels = c.string_map(f"{key}.labels")
        if fname and fversion and api in (1, 2):
            variants[vname] = Variant(vname, tag, fname, fversion, int(api), venv, vlabels,
                                      package, pythons, pins)
    gpu_wheels = _check_gpu_wheels(c)
    horovod = _check_horovod(c)
    for vname, v in variants.items():
        _check_duplicates(c, f"variants.{vname}.framework", v, gpu_wheels, horovod)

    if len(problems) > before:
        return None
    assert distro and os_version and python and cuda and upstream and suite and off_cuda and off_python
    return Release(
        name=rel, file=file, parent=str(data["parent"]) if data.get("parent") else None,
        repository=repository, os_distro=distro, os_version=os_version, python=python, cuda=cuda,
        components=components, upstream_image=upstream, upstream_digest=digest,
        offline=OfflineBase(suite, off_cuda, off_python), cuda_cc=cc, toggles=toggles,
        nvbuildopts=list(nvbuildopts), env=env, labels=labels, expose=list(expose),
        entrypoint=entrypoint, variants=variants, resolved=data, gpu_wheels=gpu_wheels, horovod=horovod,
    )


def _string_list(c: _Checker, key: str, what: str) -> list[tuple[str, str]] | None:
    """(key path, string) for each item of the list at `key`; None when absent."""
    value = c.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        c.add(key, f"must be a list of {what}, got {type(value).__name__}")
        return None
    out = []
    for i, item in enumerate(value):
        where = f"{key}[{i}]"
        if isinstance(item, float):
            c.add(where, f"write it as a quoted string, e.g. \"{item}\"")
        elif not isinstance(item, str):
            c.add(where, f"must be a string ({what}), got {type(item).__name__} {item!r}")
        else:
            out.append((where, item))
    return out


def _check_wheel(c: _Checker, key: str) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    """framework.package / pythons / pins: the upstream wheel and its known-good pins."""
    package = c.string(f"{key}.package", required=False)
    if package is not None and not PACKAGE_NAME.fullmatch(package):
        c.add(f"{key}.package", f"'{package}' is not a PyPI distribution name")
        package = None
    pythons: list[str] = []
    for where, item in _string_list(c, f"{key}.pythons", 'Python versions such as "3.9"') or []:
        if not PYTHON_VERSION.fullmatch(item):
            c.add(where, f"'{item}' is not a Python version such as \"3.9\"")
        elif item in pythons:
            c.add(where, f"Python {item} is listed twice")
        else:
            pythons.append(item)
    if c.get(f"{key}.package") is not None and c.get(f"{key}.pythons") in (None, []):
        c.add(f"{key}.pythons", "missing required field (the Pythons the package has wheels for, "
                                "e.g. [\"3.8\", \"3.9\"])")
    if c.get(f"{key}.package") is None and (c.get(f"{key}.pythons") or c.get(f"{key}.pins")):
        c.add(f"{key}.package", "missing required field (pythons and pins belong to a package, "
                                "e.g. package: tensorflow)")
    pins: list[str] = []
    seen: dict[str, str] = {}
    for where, item in _string_list(c, f"{key}.pins", 'exact pins such as "numpy==1.19.5"') or []:
        m = PIN.fullmatch(item)
        if not m:
            c.add(where, f"'{item}' is not an exact pin such as \"numpy==1.19.5\"")
            continue
        name = canonical_name(m.group(1))
        if name in seen:
            c.add(where, f"{m.group(1)} is pinned twice ({seen[name]} and {item})")
            continue
        seen[name] = item
        pins.append(item)
    return package, tuple(sorted(pythons, key=python_key)), tuple(pins)


def _check_gpu_wheels(c: _Checker) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in c.mapping("gpu_wheels").items():
        where = f"gpu_wheels.{name}"
        if not isinstance(name, str) or not COMPONENT_NAME.fullmatch(name):
            c.add(where, "component names are lower-case letters, digits, '_' and '-' (e.g. cudnn)")
        elif not isinstance(value, str) or not PIN.fullmatch(value):
            c.add(where, f"must be an exact pip requirement such as \"nvidia-cudnn-cu11==8.5.0.96\", got {value!r}")
        else:
            out[name] = value
    return out


def _check_horovod(c: _Checker) -> HorovodSpec | None:
    if c.get("horovod") is None:
        return None
    if not c.mapping("horovod", HOROVOD_KEYS):
        if c.get("horovod") == {}:
            c.add("horovod", "give {version, requires}, or null for no Horovod")
        return None
    version = c.string("horovod.version")
    if version is not None and not re.fullmatch(VERSION, version):
        c.add("horovod.version", f"'{version}' is not a version such as \"0.22.1\"")
        version = None
    requires = []
    listed = _string_list(c, "horovod.requires", 'requirements such as "cloudpickle"')
    if listed is None and c.get("horovod.requires") is None:
        c.add("horovod.requires", "missing required field (its install_requires, e.g. [cloudpickle, psutil])")
    for where, item in listed or []:
        if not REQUIREMENT.fullmatch(item):
            c.add(where, f"'{item}' is not a requirement such as \"cffi\" or \"cffi>=1.4.0\"")
        else:
            requires.append(item)
    return HorovodSpec(version, tuple(requires)) if version else None


def _check_duplicates(c: _Checker, key: str, variant: Variant, gpu_wheels: dict[str, str],
                      horovod: HorovodSpec | None) -> None:
    """One distribution is named once across the framework, its pins, the GPU wheels and
    Horovod's requirements: two versions of one package cannot both be locked."""
    owners: dict[str, str] = {}
    entries = [(variant.package, f"{key}.package")] if variant.package else []
    entries += [(PIN.fullmatch(p).group(1), f"{key}.pins") for p in variant.pins]
    entries += [(PIN.fullmatch(w).group(1), f"gpu_wheels.{n}") for n, w in gpu_wheels.items()]
    entries += [(REQUIREMENT.fullmatch(r).group(1), "horovod.requires") for r in (horovod.requires if horovod else ())]
    for name, where in entries:
        norm = canonical_name(name)
        if norm in owners and owners[norm] != where:
            problem = Problem(c.file, where, f"{name} is also named in {owners[norm]}")
            if problem not in c.problems:  # release-level clashes are seen once per variant
                c.problems.append(problem)
        owners.setdefault(norm, where)


def load(directory: Path | str = RELEASES_DIR) -> Catalog:
    """Load, resolve and validate every release; raise CatalogError listing every problem."""
    directory = Path(directory)
    problems: list[Problem] = []
    if not directory.is_dir():
        raise CatalogError([Problem(str(directory), "", "catalog directory does not exist")])
    raw = _read_files(directory, problems)
    done: dict[str, dict | None] = {}
    releases: dict[str, Release] = {}
    tags: dict[str, str] = {}
    for rel in sorted(raw, key=_release_order):
        file, data = raw[rel]
        if "parent" in data and data["parent"] is not None and not isinstance(data["parent"], str):
            problems.append(Problem(file, "parent", "must be a release name in quotes, e.g. \"21.06\""))
            continue
        merged = _resolve(rel, raw, problems, done)
        if merged is None or merged.get("abstract") is True:
            continue
        release = _check_release(rel, file, merged, problems)
        if release is None:
            continue
        for v in release.variants.values():
            ref = f"{release.repository}:{v.tag}"
            if ref in tags:
                problems.append(Problem(file, f"variants.{v.name}.tag",
                                        f"duplicate tag {ref} (also {tags[ref]})"))
            tags[ref] = f"{rel}/{v.name}"
        releases[rel] = release
    if problems:
        raise CatalogError(problems)
    return Catalog(releases)


def _release_order(name: str) -> tuple:
    """Sort '21.06' < '21.10' < '22.12' numerically; names that are not YY.MM go last."""
    parts = name.split(".")
    if all(p.isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), name)
    return (1, (), name)
