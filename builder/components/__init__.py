"""Optional components of an image, each declared once, in its own folder here.

A component is what an image may carry besides the framework (DALI and its TensorFlow
plugin, Nsight's profilers, and what comes next). Its folder holds all of it:

- `__init__.py`: a `Component` subclass: its catalog key and mapping (a `Part` model the
  catalog composes into a release file's schema), what it adds to the release's lock (pip
  requirements, an sdist locked apart under the catalog's `locks/NAME/`), the Debian
  packages it pins, how its versions are read back from a built image (probes, or an
  in-image `report.py`), and its label;
- the template partial (`PARTIAL`) rendered in the devel image before or after the
  framework's compile (`WHERE`), and any files the partial copies (`FILES`, placed under
  `components/NAME/` of the build context);
- `patches/`, where one is compiled from source by `nvbuild.sh --only NAME`: the patches
  shipped with it (`/opt/tensorflow/patches/NAME/` in the image; `builder derive
  --NAME-patch` adds more);
- `test_NAME.py`: its conformance tests, run with the image's own suite.

The stages iterate `REGISTRY` instead of naming a component: the catalog (its key),
rendering (`--without NAME`, the partial, the probes file), the image report (the probes),
readback (labels, the catalog check), `builder show` / `inspect`, the SBOM and the
conformance suite. Adding a component is adding its folder: REGISTRY finds every package
here that names its class as COMPONENT (docs/explanation/architecture.md, "Add a component").

Below the catalog: standard library, pydantic and builder.core only.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable

from builder.core.catalog_fields import Part
from builder.core.contract import InImage
from builder.core.grammar import canonical_name


@dataclass(frozen=True)
class Probe:
    """How the image report reads one tool's version in a built image: COMMAND's output
    matched by PATTERN (its first group is the version), and the Debian PACKAGE it came from
    (its installed version is what the catalog pins)."""

    name: str
    command: tuple[str, ...]
    pattern: str
    package: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"command": list(self.command), "pattern": self.pattern, "package": self.package}


PATCH_VERSIONS = re.compile(r"Versions:((?:[ \t]+[0-9][^\s]*)+)[ \t]*")


def patch_versions(path: Path) -> tuple[str, ...] | None:
    """The source versions a patch names in its header's `Versions:` line; None: it names
    none, and applies to every version."""
    header = path.read_text(encoding="utf-8").split("\n--- ", 1)[0]
    for line in header.splitlines():
        found = PATCH_VERSIONS.fullmatch(line)
        if found:
            return tuple(found.group(1).split())
    return None


class Component:
    """One optional component. Subclasses set the class attributes and may override the methods."""

    NAME: ClassVar[str]  # the catalog key, `--without NAME`, the report's and SBOM's name
    TITLE: ClassVar[str]  # what messages call it ("Nsight Systems and Nsight Compute")
    MODEL: ClassVar[type[Part]]  # the catalog mapping of NAME
    DOC: ClassVar[str]  # the catalog key's description (the reference page and JSON Schema)
    EXAMPLE: ClassVar[dict[str, Any]]  # a value the catalog accepts (tests build catalogs of them)
    LABEL: ClassVar[str]  # its label key, spelled whole: "dev.tfbuilder.NAME"
    # in its folder: its step ("": none, the lock installs it)
    PARTIAL: ClassVar[str] = "devel.Dockerfile.j2"
    # where its step goes: "after-compile" in the devel stage (a change there never
    # recompiles the framework), "before-compile" (a compiled component in its own layer: a
    # framework patch does not rebuild it) or "core" (the stage a runtime image shares)
    WHERE: ClassVar[str] = "after-compile"
    ORDER: ClassVar[int] = 50  # among the steps of one place, lower first (a longer compile first)
    # whether a runtime image holds it too: what nvbuild.sh installed with pip, and the
    # lock's wheels, are there; what the devel stage installed with apt is not
    RUNTIME: ClassVar[bool] = False
    FILES: ClassVar[tuple[str, ...]] = ()  # in its folder: what the partial COPYs
    DEBIAN_PACKAGES: ClassVar[tuple[str, ...]] = ()  # what it installs with apt (the SBOM marks them)
    BUILD_PACKAGES: ClassVar[tuple[str, ...]] = ()  # what the devel stage's toolchain needs to compile it
    # what it needs at run time from the distribution, in every image that holds it (the
    # runtime image too: its core stage installs them)
    RUNTIME_PACKAGES: ClassVar[tuple[str, ...]] = ()
    # the Python distributions it brings, as a regex on their normalized names (the SBOM marks them)
    DISTRIBUTIONS: ClassVar[str] = ""
    # in its folder: a standard-library script whose report() is its report entry, run in the
    # image by image_report.py (else the probes are)
    REPORT: ClassVar[str] = ""
    # where nvbuild.sh --only NAME finds its pristine source in the image ("": not compiled);
    # a compiled component ships nvbuild.sh's step for it, nvbuild-step.sh (build_NAME), in FILES
    SOURCE: ClassVar[str] = ""
    # the image's copy of its sdist lock, under InImage.LOCKS ("": no sdist)
    SDIST_LOCK: ClassVar[str] = ""

    @classmethod
    def directory(cls) -> Path:
        return Path(__file__).resolve().parent / cls.NAME

    @classmethod
    def packages(cls, spec: Any) -> dict[str, str]:
        """The Debian packages it installs, pinned: name -> exact version."""
        return {}

    @classmethod
    def requirements(cls, spec: Any) -> tuple[str, ...]:
        """Pip requirements resolved and hash-locked with the framework (the release's lock)."""
        return ()

    @classmethod
    def owned(cls, spec: Any) -> tuple[str, ...]:
        """Of its requirements, those that are the component itself (DALI's wheel, a tool's
        distribution): `--without NAME` refuses to leave one out that something kept needs.
        The others only serve it (Horovod's install_requires) and stay where needed."""
        return cls.requirements(spec)

    @classmethod
    def sdist(cls, spec: Any) -> tuple[str, str] | None:
        """(distribution, version) of the source distribution it is compiled from, locked
        apart in one line (the catalog's locks/NAME/DIST-VERSION.txt); None: none."""
        return None

    @classmethod
    def probes(cls, spec: Any) -> tuple[Probe, ...]:
        return ()

    @classmethod
    def patches(cls, spec: Any = None) -> list[Path]:
        """The files of its folder's patches/ that an image of SPEC ships, in the order
        nvbuild.sh applies them: a patch whose header (the text before its first `--- `)
        has a line `Versions: 0.22.1 0.28.1` is for those versions of its source (`sdist`)
        only; one without it, and every other file, for all. Without SPEC: every file."""
        folder = cls.directory() / "patches"
        found = sorted(p for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []
        source = cls.sdist(spec) if spec is not None else None
        if source is None:
            return found
        return [p for p in found if (versions := patch_versions(p)) is None or source[1] in versions]

    @classmethod
    def patchable(cls) -> bool:
        """Compiled from a source it patches: `builder derive --NAME-patch` adds patches."""
        return bool(cls.SOURCE)

    @classmethod
    def patches_in_image(cls) -> str:
        return f"{InImage.PATCHES}/{cls.NAME}"

    @classmethod
    def patches_label(cls) -> str:
        """The label recording the patches derived images added (a JSON list of name, sha256)."""
        return f"{cls.LABEL}-patches"

    @classmethod
    def report_entry(cls, spec: Any) -> dict[str, Any]:
        """How image_report.py reads it back (components.json): a script, probes, or the
        versions of installed distributions ({"distributions": [...]})."""
        if cls.REPORT:
            return {"script": f"{InImage.HOME}/components/{cls.NAME}/{cls.REPORT}"}
        return {"probes": {p.name: p.as_json() for p in cls.probes(spec)}}

    @classmethod
    def versions_text(cls, found: dict[str, Any]) -> str:
        """Its label's value from the report's entry: "nsys=2020.4.3.7 ncu=2020.3.1.0"."""
        return " ".join(f"{tool}={v.get('version') or '?'}" for tool, v in sorted(found.items()) if v)

    @classmethod
    def held_example(cls, spec: Any) -> dict[str, Any]:
        """The report entry of an image that holds SPEC as the catalog says (the reference
        page and the tests show it)."""
        pinned = cls.packages(spec)
        return {
            p.name: {"version": "1.0", "path": f"/usr/bin/{p.command[0]}", "package_version": pinned.get(p.package, "")}
            for p in cls.probes(spec)
        }

    @classmethod
    def rows(cls, found: dict[str, Any]) -> list[tuple[str, str]]:
        """`builder inspect`'s (part, version) rows from the report's entry."""
        return [
            (tool, v.get("version") or f"does not run: {v.get('error', '?')}")
            for tool, v in sorted(found.items())
            if isinstance(v, dict)
        ]

    @classmethod
    def problems(cls, spec: Any, found: dict[str, Any] | None) -> list[str]:
        """What the image's report shows against the catalog's SPEC: each tool there, each
        package at the version pinned."""
        if not found:
            return [f"{cls.TITLE} is not installed (the image reports no {cls.NAME})"]
        out = []
        pinned = cls.packages(spec) if spec is not None else {}  # None: the catalog no longer names it
        for probe in cls.probes(spec):
            tool = found.get(probe.name) or {}
            if not tool.get("version"):
                out.append(f"{cls.TITLE}: {probe.name} does not run ({tool.get('error') or 'not found'})")
            if probe.package in pinned and tool.get("package_version") != pinned[probe.package]:
                out.append(
                    f"{cls.TITLE}: the image holds {probe.package} {tool.get('package_version') or 'none'}, "
                    f"the catalog says {pinned.get(probe.package)}"
                )
        return out


def _registry() -> tuple[type[Component], ...]:
    """Every component: each folder here whose package names its class as COMPONENT, by name."""
    found = []
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).resolve().parent)]), key=lambda m: m.name):
        if info.ispkg:
            module = importlib.import_module(f"{__name__}.{info.name}")
            component = getattr(module, "COMPONENT", None)
            if component is None or component.NAME != info.name:
                raise ImportError(f"builder/components/{info.name}/ declares no COMPONENT named {info.name!r}")
            found.append(component)
    return tuple(found)


REGISTRY: tuple[type[Component], ...] = _registry()
NAMES = tuple(c.NAME for c in REGISTRY)


def get(name: str) -> type[Component]:
    for c in REGISTRY:
        if c.NAME == name:
            return c
    raise KeyError(name)


def probes_json(chosen: Iterable[tuple[type[Component], Any]]) -> str:
    """The file the image report reads (InImage.COMPONENTS): name -> {"probes": tool -> probe}
    or {"script": its in-image report.py}."""
    return json.dumps({c.NAME: c.report_entry(spec) for c, spec in chosen}, indent=1, sort_keys=True) + "\n"


def owner_of_package(name: str, held: Iterable[str], purl: str) -> str | None:
    """Of the components HELD (by name), the one that brings package NAME: a Debian package
    (PURL pkg:deb/...) it installs, or a Python distribution (pkg:pypi/...) it names."""
    for c in REGISTRY:
        if c.NAME not in held:
            continue
        if purl.startswith("pkg:deb/") and name in c.DEBIAN_PACKAGES:
            return c.NAME
        if purl.startswith("pkg:pypi/") and c.DISTRIBUTIONS and re.fullmatch(c.DISTRIBUTIONS, canonical_name(name)):
            return c.NAME
    return None


def compiled() -> tuple[str, ...]:
    """The components nvbuild.sh compiles (`nvbuild.sh --only NAME`)."""
    return tuple(c.NAME for c in REGISTRY if c.SOURCE)


def conformance_files() -> list[Path]:
    return [c.directory() / f"test_{c.NAME}.py" for c in REGISTRY]
