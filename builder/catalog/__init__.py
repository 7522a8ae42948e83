"""The release catalog: YAML files, one per release, resolved through `parent`
inheritance and validated as a whole before anything else happens.

A child states only what differs: mappings merge key by key, any other value
(lists included) replaces the parent's, and `null` removes the parent's key (so a
release can drop a variant). Every problem is collected with its file and key path
and raised together as one CatalogError.
"""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from builder.core import contract, grammar
from builder.core.errors import CatalogError, Problem, UserError

# Every field's grammar is in builder/core/grammar.py (whole-string matches); these names are
# the ones other modules import from here.
from builder.core.grammar import PACKAGE_NAME, PIN, PYTHON_VERSION, REQUIREMENT, VERSION, printable
from builder.core.userfiles import UserFileError, file_kind, read_user_bytes
from builder.in_image import cuda_arch

RELEASES_DIR = Path(__file__).parent.parent / "releases"
# A catalog file is a page of YAML: anything bigger is a mistake or an attack.
MAX_FILE_BYTES = 256 * 1024
MAX_DEPTH = 32
# How many parents a release may inherit through (the shipped catalog's deepest: 6).
MAX_PARENTS = 64
DEBIAN_SUITES = {"bullseye": "11", "bookworm": "12", "trixie": "13"}

# Allowed keys at each level; anything else is reported (a typo must not pass silently).
TOP_KEYS = {"release", "abstract", "parent", "repository", "os", "python", "cuda", "components",
            "base", "build", "env", "labels", "expose", "entrypoint", "variants", "gpu_wheels", "horovod",
            "tools", "dali", "example_packages", "vendor"}
BUILD_KEYS = {"cuda_compute_capabilities", "xla", "gcp", "hdfs", "nvbuildopts"}
VARIANT_KEYS = {"tag", "framework", "env", "labels"}
FRAMEWORK_KEYS = {"name", "version", "api", "package", "pythons", "pins", "device_code"}
DEVICE_CODE_KEYS = {"version", "cuda", "sass", "ptx", "ptx_isa"}
HOROVOD_KEYS = {"version", "requires"}
DALI_KEYS = {"version", "cuda"}
ENTRYPOINT_KEYS = {"title", "upstream_copyright", "shm_recommend"}
# Who makes the image (banner, labels, copyright line): `name` is required after merge.
VENDOR_KEYS = {"name", "maintainer", "url", "copyright_holder"}
# The labels the vendor fills (OCI annotations, and Docker's legacy `maintainer`, which
# upstream CUDA bases set to NVIDIA: overwritten so an image never inherits it). URL and
# MAINTAINER belong with the others in contract.Label; they are here until they move there.
LABEL_VENDOR = contract.Label.VENDOR
LABEL_AUTHORS = contract.Label.AUTHORS
LABEL_URL = "org.opencontainers.image.url"
LABEL_MAINTAINER = "maintainer"
VENDOR_LABELS = {LABEL_VENDOR: "vendor.name", LABEL_AUTHORS: "vendor.maintainer", LABEL_URL: "vendor.url",
                 LABEL_MAINTAINER: "vendor.maintainer (or vendor.name)"}
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
class DaliSpec:
    """NVIDIA DALI from its PyPI wheel, and its TensorFlow plugin compiled in the image by
    nvbuild.sh from the plugin's sdist against the installed TensorFlow. `cuda` is the
    wheels' CUDA flavour ("110": nvidia-dali-cuda110, nvidia-dali-tf-plugin-cuda110)."""

    version: str
    cuda: str

    @property
    def package(self) -> str:
        """DALI's own distribution name (its wheel is in the release's lock)."""
        return f"nvidia-dali-cuda{self.cuda}"

    @property
    def wheel(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def plugin(self) -> str:
        """The plugin's distribution name (its sdist is locked apart, like Horovod's)."""
        return f"nvidia-dali-tf-plugin-cuda{self.cuda}"


@dataclass(frozen=True)
class DeviceCode:
    """The device code of the framework's wheel as measured (cuobjdump --list-elf /
    --list-ptx / -ptx on its libraries): machine code for `sass`, PTX for `ptx` (X.Y
    capabilities) of ISA `ptx_isa` (the PTX's `.version`, which decides the driver that
    JIT-compiles it; the compiler sets it, not only the toolkit: TensorFlow 2.21's clang
    writes 8.3 with CUDA 12.5.1), built with CUDA `cuda`. `version` is the framework version
    it was measured on: a release that changes the version must measure again
    (builder/catalog/driver.py computes the driver contract and the GPU verdicts from it)."""

    version: str
    cuda: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    ptx_isa: str = ""


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
    device_code: DeviceCode | None = None   # the wheel's kernels (framework.device_code)

    @property
    def short(self) -> str:
        """'tf2' for 'tf2-py3': the variant as NGC's release string spells it."""
        return self.name.split("-")[0]


def ptxas_version(requirement: str | None) -> str | None:
    """'nvidia-cuda-nvcc-cu12==12.9.86' -> '12.9' (the wheel's version is its toolkit's)."""
    m = re.fullmatch(r"nvidia-cuda-nvcc(?:-cu\d+)?==(\d+\.\d+)(?:\.\S*)?", requirement or "")
    return m.group(1) if m else None


@dataclass(frozen=True)
class Vendor:
    """Who makes the image: the name the banner and labels give as its maker, and the
    holder of the image's copyright line (none unless the catalog names one)."""

    name: str
    maintainer: str | None = None
    url: str | None = None
    copyright_holder: str | None = None

    @property
    def is_nvidia(self) -> bool:
        """NVIDIA's own image (the NGC banner and NVIDIA's modification notices): the
        catalog says so by a copyright holder whose first word is NVIDIA."""
        return bool(re.match(r"NVIDIA\b", self.copyright_holder or "", re.IGNORECASE))

    def labels(self) -> dict[str, str]:
        """The image's labels naming its maker: vendor, and authors and url when given."""
        out = {LABEL_VENDOR: self.name, LABEL_MAINTAINER: self.maintainer or self.name}
        if self.maintainer:
            out[LABEL_AUTHORS] = self.maintainer
        if self.url:
            out[LABEL_URL] = self.url
        return out


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
    # why a release has no Horovod when it says so (`horovod: "absent: WHY"`); None otherwise
    horovod_absent: str | None = None
    dali: DaliSpec | None = None
    dali_absent: str | None = None  # why a release has no DALI (`dali: "absent: WHY"`)
    # what /workspace/docker-examples/Dockerfile.addpackages adds by default: apt, pip
    example_packages: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    # tool -> the pip requirement installed for it from the lock ("jupyter": "jupyterlab==4.3.8")
    tools: dict[str, str] = field(default_factory=dict)
    # tool -> why the release has it not (`tools: {NAME: "absent: WHY"}`)
    tools_absent: dict[str, str] = field(default_factory=dict)
    # who makes the image (catalog `vendor`; _common.yaml names the project)
    vendor: Vendor = Vendor("tf-image-builder")

    @property
    def ptxas(self) -> str | None:
        """The CUDA version (MAJOR.MINOR) of the ptxas NVIDIA's nvidia-cuda-nvcc wheel puts
        beside the toolkit's nvcc (gpu_wheels.cuda_nvcc), which assembles capabilities
        newer than nvcc knows (cuda_arch.assembled()); None without that wheel."""
        return ptxas_version(self.gpu_wheels.get("cuda_nvcc"))

    def tool_package(self, tool: str) -> str:
        """The distribution a tool installs ('jupyterlab' for jupyter)."""
        return canonical_name(REQUIREMENT.fullmatch(self.tools[tool]).group(1))  # type: ignore[union-attr]

    def variant(self, name: str) -> Variant:
        if name not in self.variants:
            raise UserError(f"release {self.name} has no variant {printable(name)} "
                            f"(it has: {', '.join(self.variants)})")
        return self.variants[name]

    @property
    def upstream_ref(self) -> str:
        return f"{self.upstream_image}@{self.upstream_digest}" if self.upstream_digest else self.upstream_image

    def spec_text(self, as_json: bool = False) -> str:
        """`builder show`: the release as resolved through its parents, as YAML (or JSON)."""
        spec = dict(self.resolved)
        spec.pop("abstract", None)
        if as_json:
            return json.dumps(spec, indent=2, sort_keys=False) + "\n"
        return yaml.safe_dump(spec, sort_keys=False, width=1 << 16)  # a value stays on one line


@dataclass
class Catalog:
    releases: dict[str, Release]

    def get(self, name: str) -> Release:
        if name not in self.releases:
            raise UserError(f"unknown release {printable(name)} (known: {', '.join(self.releases)})")
        return self.releases[name]

    def summary(self) -> list[dict]:
        """One row per release (`builder releases`)."""
        return [{"release": r.name, "os": f"{r.os_distro} {r.os_version}", "python": r.python, "cuda": r.cuda,
                 "variants": {v.name: f"{v.framework_name} {v.framework_version}" for v in r.variants.values()},
                 "offline_base": f"{r.offline.debian}/cuda{r.offline.cuda}/py{r.offline.python}", "parent": r.parent}
                for r in self.releases.values()]


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


class _Refused(yaml.composer.ComposerError):
    """YAML that is well formed but not accepted in a catalog."""


class _Loader(yaml.SafeLoader):
    """safe_load without anchors and aliases (one alias can expand to gigabytes: an alias
    bomb; a catalog has no use for them, `parent` is how releases share values) and
    without deep nesting (the composer recurses)."""

    def compose_node(self, parent, index):  # type: ignore[override]
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused(None, None, "anchors and aliases (&name, *name) are not allowed "
                                              "in the catalog; use `parent` to share values", event.start_mark)
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                  event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Duplicate(yaml.YAMLError):
    """Keys given twice in one file (PyYAML lets the last win, silently): every one of them."""

    def __init__(self, found: list[tuple[str, int, int]]):
        super().__init__(f"{len(found)} duplicate keys")
        self.found = found  # (dotted key path, line, line of the first)


def _duplicate_keys(loader: _Loader, node: yaml.Node, path: str = "") -> list[tuple[str, int, int]]:
    """Every key a mapping in NODE gives twice, with its key path and both lines."""
    found: list[tuple[str, int, int]] = []
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found += _duplicate_keys(loader, item, f"{path}[{i}]")
    elif isinstance(node, yaml.MappingNode):
        first: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = _key_of(loader, key_node)
            where = f"{path}.{key}" if path else str(key)
            if key is not None and key in first:
                found.append((where, key_node.start_mark.line + 1, first[key]))
            elif key is not None:
                first[key] = key_node.start_mark.line + 1
            found += _duplicate_keys(loader, value_node, where)
    return found


def _key_of(loader: _Loader, node: yaml.Node) -> Any:
    """A scalar key as the mapping will hold it ('1' and 1 differ, 1 and 0x1 do not); None
    for merge keys (<<) and keys that are not scalars (construction reports those)."""
    if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:merge":
        return None
    key = loader.construct_object(node)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _parse(path: Path) -> Any:
    """The YAML document of one catalog file; UserFileError (not a regular file, too big,
    unreadable), UnicodeDecodeError or YAMLError (_Duplicate: keys given twice) when it
    cannot be had."""
    data = read_user_bytes(path, "catalog file", MAX_FILE_BYTES)  # the one reader: a fifo swapped in, no hang
    loader = _Loader(data.decode("utf-8"))
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        duplicates = _duplicate_keys(loader, node)
        if duplicates:
            raise _Duplicate(duplicates)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _catalog_files(directory: Path) -> list[Path]:
    """The *.yaml files of a catalog directory, each a regular file (a link to one is
    fine): a fifo would block the read for ever, a device would be read as YAML."""
    if not directory.exists():
        raise UserError(f"catalog directory {directory} does not exist")
    if directory.is_file():
        raise UserError(f"catalog {directory} is a file, not a directory of release files")
    if not directory.is_dir():
        raise UserError(f"catalog {directory} is not a directory")
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise UserError(f"catalog directory {directory} holds no release files (*.yaml)")
    special = []
    for path in files:
        try:
            mode = path.stat().st_mode
        except OSError:
            continue  # a dangling link: reported by the read, with the other problems
        if not stat.S_ISREG(mode):
            special.append((path.name, file_kind(mode)))
    if len(special) == 1:
        raise UserError(f"catalog {directory}: {special[0][0]} is {special[0][1]}, not a regular file")
    if special:
        raise UserError(f"catalog {directory}: {', '.join(f'{n} ({k})' for n, k in special)} are not regular files")
    return files


def _read_files(directory: Path, problems: list[Problem]) -> dict[str, tuple[str, dict]]:
    raw: dict[str, tuple[str, dict]] = {}
    for path in _catalog_files(directory):
        name = path.name
        try:
            data = _parse(path)
        except _Duplicate as exc:  # which value was meant is not known: the file is not used
            problems += [Problem(name, key, f"line {line}: duplicate key (first on line {first}); give each key once")
                         for key, line, first in exc.found]
            continue
        except ValueError as exc:  # UnicodeDecodeError is one too
            reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
            problems.append(Problem(name, "", f"cannot read: {reason}"))
            continue
        except UserFileError as exc:  # not a regular file, too big, unreadable
            problems.append(Problem(name, "", f"cannot read: {exc.reason}"))
            continue
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f"line {mark.line + 1}: " if mark is not None else ""
            reason = grammar.one_line(getattr(exc, "problem", None) or str(exc).splitlines()[0])
            kind = "" if isinstance(exc, _Refused) else "malformed YAML: "
            problems.append(Problem(name, "", f"{line}{kind}{reason}"))
            continue
        except OSError as exc:
            problems.append(Problem(name, "", f"cannot read: {exc.strerror or exc}"))
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
        if not grammar.RELEASE.fullmatch(rel):
            problems.append(Problem(name, "release", f"{printable(rel)} is not a release name (letters, digits, "
                                                     "'.', '_' and '-'; no '..'; 64 at most)"))
            continue
        if rel in raw:
            problems.append(Problem(name, "release", f"release '{rel}' is already defined in {raw[rel][0]}"))
            continue
        raw[rel] = (name, data)
    return raw


def _resolve(rel: str, raw: dict[str, tuple[str, dict]], problems: list[Problem],
             done: dict[str, tuple[dict | None, int]]) -> dict | None:
    """The release's data merged over all its ancestors, or None when the chain is broken
    (DONE: each release resolved so far, with how many parents it inherits through).
    Iterative, so no chain is too long for Python's stack (1500 parents were a
    RecursionError): the releases up to the first one resolved (or the root) are walked
    child first, then merged root first."""
    walk: list[str] = []  # REL and its unresolved ancestors, child first
    seen: set[str] = set()
    node: str | None = rel
    while node is not None and node not in done:
        problem = _broken_link(node, walk, seen, raw)
        if problem:
            problems.append(problem)
            for name in walk:  # every release on the walk inherits the broken link
                done[name] = (None, 0)
            return None
        walk.append(node)
        seen.add(node)
        parent = raw[node][1].get("parent")
        node = None if parent is None else str(parent)
    merged, depth = (None, -1) if node is None else done[node]
    for name in reversed(walk):
        file, data = raw[name]
        depth += 1
        if data.get("parent") is None:
            merged = dict(data)
        elif depth == MAX_PARENTS + 1 and merged is not None:
            problems.append(Problem(file, "parent", f"inherits through more than {MAX_PARENTS} parents: "
                                                    f"{_names(_chain_names(name, raw))}"))
            merged = None
        elif merged is not None:
            base = {k: v for k, v in merged.items() if k not in ("abstract", "release", "parent")}
            merged = merge(base, data)
        done[name] = (merged, depth)
    return done[rel][0]


def _broken_link(node: str, walk: list[str], seen: set[str], raw: dict[str, tuple[str, dict]]) -> Problem | None:
    """The problem where a walk up the parents reaches NODE: a cycle, or no such release."""
    if node in seen:
        cycle = walk[walk.index(node):] + [node]
        return Problem(raw[node][0], "parent", f"inheritance cycle: {_names(cycle)}")
    if node not in raw:
        return Problem(raw[walk[-1]][0], "parent", f"unknown parent {printable(node)}")
    return None


def _chain_names(rel: str, raw: dict[str, tuple[str, dict]]) -> list[str]:
    """REL and the names of its ancestors, child first (a chain already walked: it ends)."""
    names = [rel]
    while names[-1] in raw and raw[names[-1]][1].get("parent") is not None and len(names) <= len(raw):
        names.append(str(raw[names[-1]][1]["parent"]))
    return names


def _names(chain: list[str]) -> str:
    """A chain of releases as one short line: a long one shows its ends and its length."""
    if len(chain) <= 8:
        return " -> ".join(chain)
    return " -> ".join(chain[:3] + ["..."] + chain[-3:]) + f" ({len(set(chain))} releases)"


class _Checker:
    """Typed access into one release's resolved data, recording problems by key path at
    the file that holds the key (a parent's bad value is its file's problem, once)."""

    def __init__(self, file: str, data: dict, problems: list[Problem],
                 chain: list[tuple[str, dict]] | None = None):
        self.file, self.data, self.problems = file, data, problems
        self.chain = chain or [(file, data)]
        self.failed = False  # a problem was found (maybe one already reported for a sibling)

    def origin(self, key: str) -> str:
        """The file, child first along the parent chain, that states KEY."""
        parts = [re.sub(r"\[\d+\]$", "", p) for p in key.split(".")]
        for file, data in self.chain:
            node: Any = data
            for part in parts:
                if not isinstance(node, dict) or node.get(part) is None:
                    break
                node = node[part]
            else:
                return file
        return self.file

    def add(self, key: str, message: str) -> None:
        self.failed = True
        problem = Problem(self.origin(key), key, message)
        if problem not in self.problems:
            self.problems.append(problem)

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
            self.add(key, f"must be a string, got {type(value).__name__} {printable(value)}")
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
            self.add(key, f"must be a boolean (true or false), got {printable(value)}")
            return False
        return value

    def string_map(self, key: str, names: re.Pattern[str], what: str,
                   values: re.Pattern[str] = grammar.CATALOG_TEXT, value_what: str = "text") -> dict[str, str]:
        """A mapping whose keys match NAMES and whose values (strings or integers) match VALUES."""
        out: dict[str, str] = {}
        for name, value in self.mapping(key).items():
            where = f"{key}.{name}"
            if not grammar.matches(names, name):
                self.add(where, f"{printable(name)} is not {what}")
                continue
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                self.add(where, f"must be a string or integer, got {type(value).__name__} {printable(value)}")
                continue
            if not values.fullmatch(str(value)):
                self.add(where, f"{printable(value)} is not {value_what}")
                continue
            out[str(name)] = str(value)
        return out

    def text(self, key: str, pattern: re.Pattern[str], what: str, required: bool = True) -> str | None:
        """A string field that must match PATTERN whole."""
        value = self.string(key, required)
        if value is not None and not pattern.fullmatch(value):
            self.add(key, f"{printable(value)} is not {what}")
            return None
        return value


def _check_release(rel: str, file: str, data: dict, problems: list[Problem],
                   chain: list[tuple[str, dict]] | None = None) -> Release | None:
    c = _Checker(file, data, problems, chain)
    for k in data:
        if k not in TOP_KEYS:
            c.add(str(k), f"unknown key (allowed: {', '.join(sorted(TOP_KEYS))})")
    repository = c.string("repository") or ""
    why = contract.repository_problem(repository) if repository else None
    if why:
        c.add("repository", f"{printable(repository)} {why}")
    c.mapping("os", {"distro", "version"})
    distro = c.text("os.distro", grammar.OS_DISTRO, "a distribution name such as ubuntu")
    os_version = c.text("os.version", grammar.NUMERIC_VERSION, "a version such as \"20.04\"")
    python = c.text("python", PYTHON_VERSION, "a Python version such as \"3.9\"")
    cuda = c.text("cuda", grammar.NUMERIC_VERSION, "a CUDA version such as \"11.4.1\"")
    if cuda is not None:
        try:
            cuda_arch.supported_archs(cuda)
        except cuda_arch.ArchError as exc:
            c.add("cuda", str(exc))
            cuda = None
    components = c.string_map("components", grammar.COMPONENT, "a component name such as cudnn",
                              grammar.NUMERIC_VERSION, "a version such as \"8.2.1\"")
    c.mapping("base", {"upstream", "offline"})
    c.mapping("base.upstream", {"image", "digest"})
    upstream = c.string("base.upstream.image")
    if upstream is not None and (contract.reference_problem(upstream) or "@" in upstream):
        c.add("base.upstream.image", f"{printable(upstream)} {contract.reference_problem(upstream) or 'has a digest'}: "
                                     "give NAME:TAG here and the digest in base.upstream.digest")
        upstream = None
    digest = c.string("base.upstream.digest", required=False)
    if digest is not None and not contract.SHA256_DIGEST.fullmatch(digest):
        c.add("base.upstream.digest", "must be sha256:<64 hex digits>")
    c.mapping("base.offline", {"debian", "cuda", "python"})
    suite = c.string("base.offline.debian")
    if suite is not None and suite not in DEBIAN_SUITES:
        c.add("base.offline.debian", f"unknown Debian suite {printable(suite)} (known: {', '.join(DEBIAN_SUITES)})")
    off_cuda = c.text("base.offline.cuda", grammar.NUMERIC_VERSION, "a CUDA version such as \"11.8\"")
    off_python = c.text("base.offline.python", PYTHON_VERSION, "a Python version such as \"3.9\"")

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
            wheels = data.get("gpu_wheels")
            ptxas = ptxas_version(wheels.get("cuda_nvcc")) if isinstance(wheels, dict) else None
            for toolkit, where in ((cuda, "cuda"), (off_cuda, "base.offline.cuda")):
                if cc and toolkit:
                    try:
                        for msg in cuda_arch.check(cc, toolkit, opt_in=None, ptxas=ptxas):
                            c.add("build.cuda_compute_capabilities", f"{msg} (from {where})")
                    except cuda_arch.ArchError as exc:
                        c.add(where, str(exc))
    nvbuildopts = [flag for where, flag in _string_list(c, "build.nvbuildopts", "build flags") or []
                   if _matches(c, where, flag, grammar.NVBUILD_FLAG,
                               "a build flag (one line, no leading '#' or surrounding spaces)")]

    env = c.string_map("env", grammar.ENV_NAME, "a valid environment variable name",
                       grammar.CATALOG_TEXT, "a value an image can carry (no control characters)")
    labels = c.string_map("labels", grammar.LABEL_KEY, LABEL_KEY_WHAT, grammar.CATALOG_TEXT, "label text (no control characters)")
    expose = data.get("expose", [])
    if not isinstance(expose, list) or not all(isinstance(p, int) and not isinstance(p, bool)
                                               and 0 < p < 65536 for p in expose):
        c.add("expose", "must be a list of port numbers")
        expose = []
    if c.get("entrypoint.copyright_holder") is not None:  # before 2026-11: the image's maker, always NVIDIA
        c.add("entrypoint.copyright_holder", "moved to vendor.copyright_holder (set it only for an image "
                                             "its holder builds; see _common.yaml)")
    c.mapping("entrypoint", ENTRYPOINT_KEYS | {"copyright_holder"})
    vendor = _check_vendor(c)
    entrypoint = {k: c.text(f"entrypoint.{k}", grammar.ONE_LINE_TEXT,
                            "one line of text (200 characters at most, no control characters)") or ""
                  for k in sorted(ENTRYPOINT_KEYS)}

    variants: dict[str, Variant] = {}
    vdata = c.mapping("variants")
    if not vdata:
        c.add("variants", "missing required field (at least one variant)")
    for vname, vraw in vdata.items():
        key = f"variants.{vname}"
        if not grammar.matches(grammar.VARIANT, vname):
            c.add(key, "variant names are lower-case letters, digits, '.' and '-' (64 at most)")
            continue
        c.mapping(key, VARIANT_KEYS)
        c.mapping(f"{key}.framework", FRAMEWORK_KEYS)
        fname = c.text(f"{key}.framework.name", grammar.FRAMEWORK_NAME,
                       "a framework name such as TensorFlow (letters, digits, ' ', '.', '_', '+', '-')")
        fversion = c.text(f"{key}.framework.version", VERSION, "a version such as \"2.5.0\"")
        api = c.required(f"{key}.framework.api")
        if api is not None and api not in (1, 2):
            c.add(f"{key}.framework.api", f"must be 1 or 2, got {printable(api)}")
        tag = c.string(f"{key}.tag", required=False) or f"{rel}-{vname}"
        why = contract.tag_problem(tag)
        if why:
            c.add(f"{key}.tag", f"{printable(tag)} {why}")
        package, pythons, pins = _check_wheel(c, f"{key}.framework")
        venv = c.string_map(f"{key}.env", grammar.ENV_NAME, "a valid environment variable name",
                            grammar.CATALOG_TEXT, "a value an image can carry (no control characters)")
        vlabels = c.string_map(f"{key}.labels", grammar.LABEL_KEY, LABEL_KEY_WHAT,
                               grammar.CATALOG_TEXT, "label text (no control characters)")
        device_code = _check_device_code(c, f"{key}.framework.device_code", fname, fversion)
        if fname and fversion and api in (1, 2):
            variants[vname] = Variant(vname, tag, fname, fversion, int(api), venv, vlabels,
                                      package, pythons, pins, device_code)
    gpu_wheels = _check_gpu_wheels(c)
    horovod, horovod_absent = _check_horovod(c)
    tools, tools_absent = _check_tools(c)
    dali, dali_absent = _check_dali(c)
    examples = _check_example_packages(c)
    for vname, v in variants.items():
        _check_duplicates(c, f"variants.{vname}.framework", v, gpu_wheels, horovod,
                          {**tools, **({"dali": dali.wheel} if dali else {})})

    if c.failed:
        return None
    assert distro and os_version and python and cuda and upstream and suite and off_cuda and off_python and vendor
    return Release(
        name=rel, file=file, parent=str(data["parent"]) if data.get("parent") else None,
        repository=repository, os_distro=distro, os_version=os_version, python=python, cuda=cuda,
        components=components, upstream_image=upstream, upstream_digest=digest,
        offline=OfflineBase(suite, off_cuda, off_python), cuda_cc=cc, toggles=toggles,
        nvbuildopts=list(nvbuildopts), env=env, labels=labels, expose=list(expose),
        entrypoint=entrypoint, variants=variants, resolved=data, gpu_wheels=gpu_wheels, horovod=horovod,
        horovod_absent=horovod_absent, tools=tools, tools_absent=tools_absent,
        dali=dali, dali_absent=dali_absent, example_packages=examples, vendor=vendor,
    )


VENDOR_TEXT = "one line of text (200 characters at most, no control characters, no leading or trailing space)"


def _vendor_text(c: _Checker, key: str, required: bool = False) -> str | None:
    """A vendor string: one line, trimmed (it is printed in the banner and labels)."""
    value = c.text(key, grammar.ONE_LINE_TEXT, VENDOR_TEXT, required=required)
    if value is not None and (value != value.strip() or "\t" in value):
        c.add(key, f"{printable(value)} is not {VENDOR_TEXT}")
        return None
    return value


def _check_vendor(c: _Checker) -> Vendor | None:
    """vendor: {name, maintainer, url, copyright_holder}: the image's maker. Catalog labels
    may not set the labels it fills (one value, given once)."""
    _check_vendor_labels(c)
    if c.get("vendor") is None:
        _missing(c, "vendor", "missing required field (who makes the image, e.g. vendor: {name: \"ML Platform\"}; "
                              "_common.yaml gives \"tf-image-builder\")")
        return None
    if not isinstance(c.get("vendor"), dict):
        c.mapping("vendor")  # reports "must be a mapping"
        return None
    c.mapping("vendor", VENDOR_KEYS)
    if c.get("vendor.name") is None:
        _missing(c, "vendor.name", "missing required field (the maker's name, e.g. \"ML Platform\")")
    name = _vendor_text(c, "vendor.name")
    maintainer = _vendor_text(c, "vendor.maintainer")
    holder = _vendor_text(c, "vendor.copyright_holder")
    url = _vendor_url(c)
    return Vendor(name, maintainer, url, holder) if name else None


def _missing(c: _Checker, key: str, message: str) -> None:
    """A required key that is absent: reported at the file whose `null` removed it, if one did
    (c.add would name the parent that still states it)."""
    *parents, last = key.split(".")
    for file, data in c.chain:
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node and node[last] is None:
            c.failed = True
            problem = Problem(file, key, f"{message}; null removed it")
            if problem not in c.problems:
                c.problems.append(problem)
            return
    c.add(key, message)


def _vendor_url(c: _Checker) -> str | None:
    """vendor.url: an http(s) URL the labels publish (so no user:password@ in it)."""
    url = c.text("vendor.url", grammar.URL, "an http(s) URL such as \"https://git.example.com/ml/images\" "
                                            "(no query, fragment or space)", required=False)
    if url is None:
        return None
    if grammar.URL.fullmatch(url).group("userinfo"):  # type: ignore[union-attr]
        c.add("vendor.url", "holds a user:password@; the image's labels publish it: give the URL without it")
        return None
    if len(url) > grammar.URL_MAX:
        c.add("vendor.url", f"longer than {grammar.URL_MAX} characters")
        return None
    return url


def _check_vendor_labels(c: _Checker) -> None:
    """The labels naming the image's maker come from `vendor` only: a catalog label
    setting one would contradict it."""
    variants = c.get("variants")
    for where in ("labels", *(f"variants.{v}.labels" for v in (variants if isinstance(variants, dict) else {}))):
        labels = c.get(where)
        for key in (labels if isinstance(labels, dict) else {}):
            if key in VENDOR_LABELS:
                c.add(f"{where}.{key}", f"set by {VENDOR_LABELS[key]}: give it there")


LABEL_KEY_WHAT = "a label key (reverse-DNS: lower-case letters and digits, '.' or '-' between them)"


def _matches(c: _Checker, where: str, value: str, pattern: re.Pattern[str], what: str) -> bool:
    if pattern.fullmatch(value):
        return True
    c.add(where, f"{printable(value)} is not {what}")
    return False


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
            c.add(where, f"must be a string ({what}), got {type(item).__name__} {printable(item)}")
        else:
            out.append((where, item))
    return out


def _check_wheel(c: _Checker, key: str) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    """framework.package / pythons / pins: the upstream wheel and its known-good pins."""
    package = c.string(f"{key}.package", required=False)
    if package is not None and not PACKAGE_NAME.fullmatch(package):
        c.add(f"{key}.package", f"{printable(package)} is not a PyPI distribution name")
        package = None
    pythons: list[str] = []
    for where, item in _string_list(c, f"{key}.pythons", 'Python versions such as "3.9"') or []:
        if not PYTHON_VERSION.fullmatch(item):
            c.add(where, f"{printable(item)} is not a Python version such as \"3.9\"")
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
            c.add(where, f"{printable(item)} is not an exact pin such as \"numpy==1.19.5\"")
            continue
        name = canonical_name(m.group(1))
        if name in seen:
            c.add(where, f"{m.group(1)} is pinned twice ({seen[name]} and {item})")
            continue
        seen[name] = item
        pins.append(item)
    return package, tuple(sorted(pythons, key=python_key)), tuple(pins)


def _check_device_code(c: _Checker, key: str, fname: str | None, fversion: str | None) -> DeviceCode | None:
    """framework.device_code: {version, cuda, sass, ptx}, the wheel's kernels as measured.
    Inherited by a child that names another framework version, it is refused: the new
    wheel's code must be measured, not assumed."""
    if c.get(key) is None or not c.mapping(key, DEVICE_CODE_KEYS):
        return None
    version = c.text(f"{key}.version", VERSION, "a version such as \"2.5.0\"")
    if version and fversion and version != fversion:
        c.add(f"{key}.version", f"describes {fname} {version}'s wheel, not {fversion}'s: measure the wheel's "
                                "device code (cuobjdump --list-elf/--list-ptx) and state it here")
        return None
    cuda = c.text(f"{key}.cuda", grammar.NUMERIC_VERSION, "the CUDA version that built the wheel, e.g. \"11.2\"")
    lists: dict[str, tuple[str, ...]] = {}
    for part in ("sass", "ptx"):
        items = [item for _, item in _string_list(c, f"{key}.{part}", 'capabilities such as "8.0"') or []]
        if c.get(f"{key}.{part}") is None:
            c.add(f"{key}.{part}", 'missing required field (capabilities such as ["7.0", "8.0"]; [] for none)')
            continue
        try:
            parsed = cuda_arch.parse(items) if items else []
            problems = cuda_arch.check(parsed, cuda, opt_in=None) if cuda and parsed else []
        except cuda_arch.ArchError as exc:
            problems = [str(exc)]
        if problems:
            c.add(f"{key}.{part}", problems[0])
            continue
        lists[part] = tuple(parsed)  # type: ignore[arg-type]
    isa = c.text(f"{key}.ptx_isa", re.compile(r"[0-9]\.[0-9]"), "a PTX ISA version such as \"7.2\"",
                 required=bool(lists.get("ptx")))
    if not (version and cuda and len(lists) == 2) or (lists["ptx"] and not isa):
        return None
    return DeviceCode(version, cuda, lists["sass"], lists["ptx"], isa or "")


def _check_gpu_wheels(c: _Checker) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in c.mapping("gpu_wheels").items():
        where = f"gpu_wheels.{name}"
        if not grammar.matches(grammar.COMPONENT, name):
            c.add(where, "component names are lower-case letters, digits, '_' and '-' (e.g. cudnn)")
        elif not isinstance(value, str) or not PIN.fullmatch(value):
            c.add(where, f"must be an exact pip requirement such as \"nvidia-cudnn-cu11==8.5.0.96\", got {printable(value)}")
        else:
            out[name] = value
    return out


ABSENT = re.compile(r"absent: (\S.*)")


def _absent_reason(c: _Checker, key: str, value: str, shape: str) -> str | None:
    """WHY of a component's `"absent: WHY"`; any other string is reported (None)."""
    m = ABSENT.fullmatch(value)
    if not m or not grammar.matches(grammar.CATALOG_TEXT, value):
        c.add(key, f"{printable(value)}: give {shape}, null, or \"absent: WHY\"")
        return None
    return m.group(1)


def _check_horovod(c: _Checker) -> tuple[HorovodSpec | None, str | None]:
    """horovod: {version, requires}; null (none); or "absent: WHY", a release that says
    why it has none (a component its users would expect, which does not build there)."""
    value = c.get("horovod")
    if value is None:
        return None, None
    if isinstance(value, str):
        return None, _absent_reason(c, "horovod", value, "{version, requires}")
    if not c.mapping("horovod", HOROVOD_KEYS):
        if value == {}:
            c.add("horovod", "give {version, requires}, null for no Horovod, or \"absent: WHY\"")
        return None, None
    version = c.string("horovod.version")
    if version is not None and not VERSION.fullmatch(version):
        c.add("horovod.version", f"{printable(version)} is not a version such as \"0.22.1\"")
        version = None
    requires = []
    listed = _string_list(c, "horovod.requires", 'requirements such as "cloudpickle"')
    if listed is None and c.get("horovod.requires") is None:
        c.add("horovod.requires", "missing required field (its install_requires, e.g. [cloudpickle, psutil])")
    for where, item in listed or []:
        if not REQUIREMENT.fullmatch(item):
            c.add(where, f"{printable(item)} is not a requirement such as \"cffi\" or \"cffi>=1.4.0\"")
        else:
            requires.append(item)
    return (HorovodSpec(version, tuple(requires)) if version else None), None


def _check_dali(c: _Checker) -> tuple[DaliSpec | None, str | None]:
    """dali: {version, cuda} (the wheels' CUDA flavour, "110" or "120"); null; or "absent: WHY"."""
    value = c.get("dali")
    if value is None:
        return None, None
    if isinstance(value, str):
        return None, _absent_reason(c, "dali", value, "{version, cuda}")
    if not c.mapping("dali", DALI_KEYS):
        return None, None
    version = c.string("dali.version")
    if version is not None and not VERSION.fullmatch(version):
        c.add("dali.version", f"{printable(version)} is not a version such as \"1.34.0\"")
        version = None
    flavour = c.string("dali.cuda")
    if flavour is not None and not re.fullmatch(r"1[0-9]{2}", flavour):
        c.add("dali.cuda", f"{printable(flavour)} is not a DALI wheel flavour such as \"110\" or \"120\"")
        flavour = None
    return (DaliSpec(version, flavour) if version and flavour else None), None


def _check_example_packages(c: _Checker) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """example_packages: {apt: [...], pip: [...]}: the docker-examples' defaults."""
    c.mapping("example_packages", {"apt", "pip"})
    out = []
    for key, pattern, what in (("apt", grammar.APT_NAME, 'Debian package names such as "jq"'),
                               ("pip", grammar.PIP_SPEC, 'pip requirements such as "tensorflow-addons==0.13.0"')):
        items = []
        for where, item in _string_list(c, f"example_packages.{key}", what) or []:
            if _matches(c, where, item, pattern, what):
                items.append(item)
        out.append(tuple(items))
    return out[0], out[1]


def _check_tools(c: _Checker) -> tuple[dict[str, str], dict[str, str]]:
    """tools: {NAME: "requirement" | "absent: WHY" | null}: what the image installs from its
    lock for its users (JupyterLab, TensorBoard), or why a release cannot have one."""
    tools: dict[str, str] = {}
    absent: dict[str, str] = {}
    for name, value in c.mapping("tools").items():
        where = f"tools.{name}"
        if not grammar.matches(grammar.COMPONENT, name):
            c.add(where, "tool names are lower-case letters, digits, '_' and '-' (e.g. jupyter)")
        elif value is None:
            continue  # a release that leaves out what its parent has
        elif not isinstance(value, str) or not grammar.matches(grammar.CATALOG_TEXT, value):
            c.add(where, f"give a pip requirement such as \"jupyterlab==4.3.8\", null, or \"absent: WHY\", "
                         f"got {printable(value)}")
        elif ABSENT.fullmatch(value):
            absent[name] = ABSENT.fullmatch(value).group(1)  # type: ignore[union-attr]
        elif not REQUIREMENT.fullmatch(value):
            c.add(where, f"{printable(value)} is not a pip requirement such as \"jupyterlab==4.3.8\"")
        else:
            tools[name] = value
    return tools, absent


def _check_duplicates(c: _Checker, key: str, variant: Variant, gpu_wheels: dict[str, str],
                      horovod: HorovodSpec | None, tools: dict[str, str] | None = None) -> None:
    """One distribution is named once across the framework, its pins, the GPU wheels,
    Horovod's requirements and the tools: two versions of one package cannot both be locked."""
    owners: dict[str, str] = {}
    entries = [(variant.package, f"{key}.package")] if variant.package else []
    entries += [(PIN.fullmatch(p).group(1), f"{key}.pins") for p in variant.pins]
    entries += [(PIN.fullmatch(w).group(1), f"gpu_wheels.{n}") for n, w in gpu_wheels.items()]
    entries += [(REQUIREMENT.fullmatch(r).group(1), "horovod.requires") for r in (horovod.requires if horovod else ())]
    entries += [(REQUIREMENT.fullmatch(r).group(1), f"tools.{n}") for n, r in (tools or {}).items()]
    for name, where in entries:
        norm = canonical_name(name)
        if norm in owners and owners[norm] != where:
            c.add(where, f"{name} is also named in {owners[norm]}")  # added once, not once per variant
        owners.setdefault(norm, where)


def load_selected() -> Catalog:
    """The shipped catalog, or the directory BUILDER_CATALOG names (a private catalog)."""
    return load(os.environ.get("BUILDER_CATALOG") or RELEASES_DIR)


def load(directory: Path | str = RELEASES_DIR) -> Catalog:
    """Load, resolve and validate every release; raise CatalogError listing every problem."""
    directory = Path(directory)
    problems: list[Problem] = []
    raw = _read_files(directory, problems)
    done: dict[str, tuple[dict | None, int]] = {}
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
        release = _check_release(rel, file, merged, problems, _chain(rel, raw))
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
        raise CatalogError(list(dict.fromkeys(problems)))  # a parent's problem once, at its file
    return Catalog(releases)


def _chain(rel: str, raw: dict[str, tuple[str, dict]]) -> list[tuple[str, dict]]:
    """(file, data) of the release and its ancestors, child first (resolved: no cycle)."""
    out: list[tuple[str, dict]] = []
    while rel in raw and len(out) <= len(raw):
        file, data = raw[rel]
        out.append((file, data))
        rel = str(data.get("parent")) if data.get("parent") is not None else ""
    return out


def _release_order(name: str) -> tuple:
    """Sort '21.06' < '21.10' < '22.12' numerically; names that are not YY.MM go last."""
    parts = name.split(".")
    if all(p.isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), name)
    return (1, (), name)
