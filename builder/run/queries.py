"""The commands that read rather than build, as runs: what an image holds (`inspect`), the
catalog's releases, an image's SBOM and a signature's check. The CLI reaches images, the
engine and the supply chain only through here and the other runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from builder import supply_chain
from builder.catalog import Catalog
from builder.engine import Engine
from builder.engine.buildkit_engine import connect as connect_engine
from builder.image import describe
from builder.registry import Credentials

# the engine with the best backend here: the factory every command hands its run
connect: Callable[[], Engine] = connect_engine


def inspect_text(connect: Callable[[], Engine], image: str, wanted: list[str], coverage: bool, as_json: bool) -> str:
    """`builder inspect`: IMAGE's own report (and coverage), as text or JSON."""
    return describe.report_text(describe.describe(connect(), image, wanted), coverage, as_json)


def releases_text(catalog: Catalog, as_json: bool) -> str:
    """`builder releases`: one row per release, as a table or JSON."""
    rows = describe.releases_rows(catalog)
    return json.dumps(rows, indent=2) if as_json else describe.releases_text(rows)


def sbom_text(connect: Callable[[], Engine], image: str, output: Path | None) -> str | None:
    """`builder sbom`: the SBOM on stdout (returned), or written to OUTPUT (None)."""
    return supply_chain.run_sbom(connect, image, output)


def verified_text(
    ref: str, key: Path, creds: Credentials | None, insecure: bool, catalog: Catalog, as_json: bool
) -> str:
    """`builder verify`: REF's signature, SBOM and provenance checked against KEY."""
    return supply_chain.verified_text(supply_chain.verify(ref, key, creds, insecure, catalog), ref, as_json)
