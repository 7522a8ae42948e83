"""`builder render`: the committed Dockerfiles under dockerfiles/ (written, or checked for
drift) and build contexts written for one release. Every variant is rendered (and so
validated) before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from builder.catalog import Catalog, Release
from builder.catalog.policy import buildable_variants
from builder.core import outputdir
from builder.core.errors import UserError
from builder.image import buildcontext
from builder.render import Rendered, committed_path, render, render_options


@dataclass
class SyncResult:
    expected: int = 0  # Dockerfiles the catalog makes
    written: int = 0  # written (or build contexts, with an output directory)
    drift: list[str] = field(default_factory=list)  # with check: what differs

    def summary(self, check: bool, output: Path | None) -> str:
        if check:
            return f"dockerfiles/ matches the catalog ({self.expected} Dockerfiles)"
        if output is None:
            return f"rendered {self.expected} Dockerfiles, {self.written} changed"
        return f"wrote {self.written} build contexts under {output}"


def sync_all(catalog: Catalog, root: Path, output: Path | None = None, check: bool = False) -> SyncResult:
    """Render every buildable release variant with the release's own options into
    ROOT/dockerfiles (or check it, or write build contexts under OUTPUT)."""
    result = SyncResult()
    expected = set()
    # not buildable here: no Dockerfile pretends otherwise
    pairs = [(rel, v) for rel in catalog.releases.values() for v in buildable_variants(rel)[0]]
    if output is not None:  # a link planted on the way to any context: refused before the first write
        for rel, v in pairs:
            outputdir.check_below(output / rel.name / v.name, output)
    for rel, v in pairs:
        rendered = render(rel, v, render_options(rel))
        path = committed_path(root, rel.name, v.name)
        expected.add(path)
        if output is not None:
            buildcontext.write(rendered, output / rel.name / v.name, root=output)  # no link below OUTPUT
            result.written += 1
            continue
        text = rendered.dockerfile  # a layered release's holds its runtime stage
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            if check:
                result.drift.append(str(path.relative_to(root)))
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                outputdir.write_atomic(path, text)
                result.written += 1
    result.expected = len(expected)
    # Only Dockerfiles of releases this catalog knows can be stale: a private catalog
    # (BUILDER_CATALOG) with a subset of the releases leaves the others alone.
    stale = sorted(
        p
        for p in (root / "dockerfiles").glob("*/*.Dockerfile")
        if p not in expected and p.parent.name in catalog.releases
    )
    if check:
        result.drift += [f"{p.relative_to(root)} (no such release variant)" for p in stale]
    elif output is None:
        for p in stale:
            p.unlink()
    return result


def render_release(rel: Release, variant: str | None, options, say: Callable[[str], None]) -> list[Rendered]:
    """One variant, or every variant that can be built here (the others named with the reason)."""
    if variant:
        variants = [rel.variant(variant)]
    else:
        variants, skipped = buildable_variants(rel)
        for name, reason in skipped:
            say(f"skipped {name}: {reason}")
        if not variants:
            raise UserError(f"release {rel.name} has no variant that can be built here")
    return [render(rel, v, options) for v in variants]  # all validated before any write


def write_contexts(rendered_all: list[Rendered], output: Path, framework_src: Path | None) -> list[Path]:
    """Each rendered variant's build context; returns the Dockerfiles written."""
    dests = [output if len(rendered_all) == 1 else output / r.variant for r in rendered_all]
    for dest in dests:  # a link planted on the way to any of them: refused before the first write
        outputdir.check_below(dest, output)
    for rendered, dest in zip(rendered_all, dests):
        buildcontext.write(rendered, dest, framework_src, root=output)  # no link followed below OUTPUT
    return [dest / "Dockerfile" for dest in dests]
