"""Optional components of an image, each declared once, in its own folder here.

A component is what an image may carry besides the framework (Nsight's profilers, and what
comes next). Its folder holds all of it:

- `__init__.py`: a `Component` subclass: its catalog key and mapping (a `Part` model the
  catalog composes into a release file's schema), the Debian packages it pins, the probes
  that read its versions back from a built image, and its label;
- the template partial (`PARTIAL`) rendered in the devel image after the compile, and any
  files the partial copies (`FILES`, placed under `components/NAME/` of the build context);
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable

from builder.core.catalog_fields import Part


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


class Component:
    """One optional component. Subclasses set the class attributes and may override the methods."""

    NAME: ClassVar[str]  # the catalog key, `--without NAME`, the report's and SBOM's name
    TITLE: ClassVar[str]  # what messages call it ("Nsight Systems and Nsight Compute")
    MODEL: ClassVar[type[Part]]  # the catalog mapping of NAME
    DOC: ClassVar[str]  # the catalog key's description (the reference page and JSON Schema)
    EXAMPLE: ClassVar[dict[str, Any]]  # a value the catalog accepts (tests build catalogs of them)
    LABEL: ClassVar[str]  # its label key, spelled whole: "dev.tfbuilder.NAME"
    # in its folder: its step, rendered in the devel stage after the compile (a runtime image,
    # which copies what nvbuild.sh built, holds none of it)
    PARTIAL: ClassVar[str] = "devel.Dockerfile.j2"
    FILES: ClassVar[tuple[str, ...]] = ()  # in its folder: what the partial COPYs
    DEBIAN_PACKAGES: ClassVar[tuple[str, ...]] = ()  # what it installs with apt (the SBOM marks them)

    @classmethod
    def directory(cls) -> Path:
        return Path(__file__).resolve().parent / cls.NAME

    @classmethod
    def packages(cls, spec: Any) -> dict[str, str]:
        """The Debian packages it installs, pinned: name -> exact version."""
        return {}

    @classmethod
    def probes(cls, spec: Any) -> tuple[Probe, ...]:
        return ()

    @classmethod
    def versions_text(cls, found: dict[str, Any]) -> str:
        """Its label's value from the report's entry: "nsys=2020.4.3.7 ncu=2020.3.1.0"."""
        return " ".join(f"{tool}={v.get('version') or '?'}" for tool, v in sorted(found.items()) if v)

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
    """The probes file the image report reads (InImage.COMPONENTS): name -> tool -> probe."""
    return (
        json.dumps(
            {c.NAME: {p.name: p.as_json() for p in c.probes(spec)} for c, spec in chosen}, indent=1, sort_keys=True
        )
        + "\n"
    )


def owner_of_package(name: str, held: Iterable[str]) -> str | None:
    """Of the components HELD (by name), the one that installs Debian package NAME."""
    for c in REGISTRY:
        if c.NAME in held and name in c.DEBIAN_PACKAGES:
            return c.NAME
    return None


def conformance_files() -> list[Path]:
    return [c.directory() / f"test_{c.NAME}.py" for c in REGISTRY]
