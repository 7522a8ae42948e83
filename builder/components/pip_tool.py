"""What JupyterLab and TensorBoard share: a tool for the image's users installed from the
release's lock (a pip requirement, resolved and hash-locked with the framework) in the core
stage, so a runtime image holds it too. Read back from the installed distribution's own
metadata; `--without NAME` takes it out of the lock the image installs."""

from __future__ import annotations

import re
from typing import Any

from builder.components import Component
from builder.core.catalog_fields import Grammar, Part, field
from builder.core.grammar import REQUIREMENT, canonical_name

REQUIREMENT_WHAT = 'a pip requirement such as "jupyterlab==4.6.6"'


class PipToolSpec(Part):
    """The requirement that installs it."""

    requirement: Grammar(REQUIREMENT, REQUIREMENT_WHAT) = field(  # type: ignore[valid-type]
        'Its pip requirement, locked with the framework, e.g. "jupyterlab==4.6.6".', "jupyterlab==4.6.6"
    )


class PipTool(Component):
    """A tool installed from the lock. Subclasses name it and what it serves."""

    MODEL = PipToolSpec
    RUNTIME = True
    WHERE = "core"
    PARTIAL = ""  # nothing to run: the lock installs it (a subclass may add its settings)

    @classmethod
    def requirements(cls, spec: Any) -> tuple[str, ...]:
        return (spec.requirement,)

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
