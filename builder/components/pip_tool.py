"""What JupyterLab and TensorBoard share: a tool for the image's users installed from the
release's lock (a pip requirement, resolved and hash-locked with the framework) in the core
stage, so a runtime image holds it too. Read back from the installed distribution's own
metadata; `--without NAME` takes it out of the lock the image installs.

Its requirement may be a range: `builder lock` then tries its versions newest first and
locks the first that resolves with the release (builder/catalog/tool_versions.py). Its
`pins` bound what it pulls in where the metadata does not say what an older framework's
pins break at run time (JupyterLab 3.0 with TensorFlow 2.5: "jsonschema<4.18"); they are
locked like any requirement and leave with it under `--without`."""

from __future__ import annotations

import re
from typing import Any, Optional

from builder.components import Component
from builder.core.catalog_fields import Grammar, Part, StringList, field, matching, optional
from builder.core.grammar import REQUIREMENT, canonical_name

REQUIREMENT_WHAT = 'a pip requirement such as "jupyterlab==4.6.6"'


class PipToolSpec(Part):
    """The requirement that installs it."""

    requirement: Grammar(REQUIREMENT, REQUIREMENT_WHAT) = field(  # type: ignore[valid-type]
        'Its pip requirement, locked with the framework, e.g. "jupyterlab==4.6.6"; a range such as '
        '"jupyterlab>=3,<4": `builder lock` locks the newest version that resolves with the release.',
        "jupyterlab==4.6.6",
    )
    pins: Optional[
        StringList(  # type: ignore[valid-type]
            'requirements such as "jsonschema<4.18"',
            matching(REQUIREMENT, 'a pip requirement such as "jsonschema<4.18"'),
            REQUIREMENT,
        )
    ] = optional(
        "Requirements of what it pulls in, locked with it, where the release's pins break a newer one at "
        'run time, e.g. ["jsonschema<4.18"]; they serve it only (`--without` drops what nothing else needs).',
        ["jsonschema<4.18"],
    )


class PipTool(Component):
    """A tool installed from the lock. Subclasses name it and what it serves."""

    MODEL = PipToolSpec
    RUNTIME = True
    WHERE = "core"
    PARTIAL = ""  # nothing to run: the lock installs it (a subclass may add its settings)

    @classmethod
    def requirements(cls, spec: Any) -> tuple[str, ...]:
        return (spec.requirement, *(spec.pins or ()))

    @classmethod
    def owned(cls, spec: Any) -> tuple[str, ...]:
        return (spec.requirement,)  # its pins serve it, and whatever else needs them

    @classmethod
    def distribution(cls, spec: Any) -> str:
        """The distribution its requirement installs ("jupyterlab")."""
        return canonical_name(REQUIREMENT.fullmatch(spec.requirement).group(1))  # type: ignore[union-attr]

    @classmethod
    def report_entry(cls, spec: Any) -> dict[str, Any]:
        return {"distributions": [cls.distribution(spec)]}

    @classmethod
    def held_example(cls, spec: Any) -> dict[str, Any]:
        pinned = re.fullmatch(r".*==\s*([^,\s]+)", spec.requirement)
        return {cls.distribution(spec): {"version": pinned.group(1) if pinned else "1.0"}}

    @classmethod
    def versions_text(cls, found: dict[str, Any]) -> str:
        return " ".join(f"{dist}={v.get('version')}" for dist, v in sorted(found.items()) if v.get("version"))

    @classmethod
    def problems(cls, spec: Any, found: dict[str, Any] | None) -> list[str]:
        if spec is None:
            return [] if found else [f"{cls.TITLE} is not installed (the image reports no {cls.NAME})"]
        version = ((found or {}).get(cls.distribution(spec)) or {}).get("version")
        if not version:
            return [f"{cls.TITLE} is not installed (the image reports no {cls.NAME})"]
        pinned = re.fullmatch(r".*==\s*([^,\s]+)", spec.requirement)
        if pinned and pinned.group(1) != version:
            return [f"the image holds {cls.TITLE} {version}, the catalog says {spec.requirement}"]
        return []
