"""The release catalog: YAML files, one per release, resolved through `parent`
inheritance and validated as a whole before anything else happens.

builder/catalog/yaml_loader.py reads the files safely and resolves parents;
builder/catalog/schema.py declares every key once (pydantic models), and
builder/catalog/validate.py checks each resolved release against them, turning a release
that passes into the frozen records of builder/catalog/release.py. Every problem of every
file is collected with its file and key path and raised together as one CatalogError.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from builder.catalog import schema
from builder.catalog.release import (  # noqa: F401
    LABEL_AUTHORS,
    LABEL_MAINTAINER,
    LABEL_URL,
    LABEL_VENDOR,
    TOGGLES,
    VENDOR_LABELS,
    DeviceCode,
    OfflineBase,
    Release,
    Variant,
    Vendor,
    ptxas_version,
    python_key,
)
from builder.catalog.schema import DEBIAN_SUITES, LABEL_KEY_WHAT  # noqa: F401
from builder.catalog.validate import check_release as _check_release
from builder.catalog.yaml_loader import (  # noqa: F401
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_PARENTS,
    _catalog_files,
    _chain,
    _read_files,
    _release_order,
    _resolve,
    merge,
)
from builder.core.catalog_fields import ABSENT  # noqa: F401
from builder.core.errors import CatalogError, Problem, UserError

# Every field's grammar is in builder/core/grammar.py (whole-string matches); these names are
# the ones other modules import from here.
from builder.core.grammar import (  # noqa: F401
    PACKAGE_NAME,
    PIN,
    PYTHON_VERSION,
    REQUIREMENT,
    VERSION,
    canonical_name,
    printable,
)

RELEASES_DIR = Path(__file__).parent.parent / "releases"

# The keys allowed at each level, as the models declare them.
TOP_KEYS = schema.keys(schema.ReleaseDoc)
BUILD_KEYS = schema.keys(schema.Build)
VARIANT_KEYS = schema.keys(schema.Variant)
FRAMEWORK_KEYS = schema.keys(schema.Framework)
DEVICE_CODE_KEYS = schema.keys(schema.DeviceCode)
ENTRYPOINT_KEYS = schema.keys(schema.Entrypoint)
VENDOR_KEYS = schema.keys(schema.Vendor)


@dataclass
class Catalog:
    releases: dict[str, Release]

    def get(self, name: str) -> Release:
        if name not in self.releases:
            raise UserError(f"unknown release {printable(name)} (known: {', '.join(self.releases)})")
        return self.releases[name]

    def summary(self) -> list[dict]:
        """One row per release (`builder releases`)."""
        return [
            {
                "release": r.name,
                "os": f"{r.os_distro} {r.os_version}",
                "python": r.python,
                "cuda": r.cuda,
                "variants": {v.name: f"{v.framework_name} {v.framework_version}" for v in r.variants.values()},
                "offline_base": f"{r.offline.debian}/cuda{r.offline.cuda}/py{r.offline.python}",
                "parent": r.parent,
            }
            for r in self.releases.values()
        ]


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
            problems.append(Problem(file, "parent", 'must be a release name in quotes, e.g. "21.06"'))
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
                problems.append(Problem(file, f"variants.{v.name}.tag", f"duplicate tag {ref} (also {tags[ref]})"))
            tags[ref] = f"{rel}/{v.name}"
        releases[rel] = release
    if problems:
        raise CatalogError(list(dict.fromkeys(problems)))  # a parent's problem once, at its file
    return Catalog(releases)
