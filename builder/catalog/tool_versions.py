"""Which version of a tool (a pip tool component: JupyterLab, TensorBoard) a release's lock
takes when the catalog names a range ("jupyterlab>=3,<5"): its versions newest first,
the newest of each minor line, each tried pinned with the rest of the release's
requirements; the first that resolves is locked, and each refusal is reported with the
resolver's reason. Only when none resolves is the tool declared absent, with every reason.

Pure: the versions on the index and the resolver come from builder/catalog/lock_resolve.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

# At most this many minor lines are tried: each try is a whole resolution of the release.
MAX_TRIES = 12


def distribution(requirement: str) -> str:
    """The distribution REQUIREMENT names ("jupyterlab" of "jupyterlab>=3,<5")."""
    try:
        return Requirement(requirement).name
    except InvalidRequirement as e:
        raise ValueError(f"{requirement!r} is not a requirement: {e}") from None


def exact_version(requirement: str) -> str | None:
    """The version REQUIREMENT pins with `==` alone (no wildcard), else None: a range."""
    specs = list(Requirement(requirement).specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and not specs[0].version.endswith(".*"):
        return specs[0].version
    return None


def candidates(requirement: str, versions: Iterable[str], limit: int = MAX_TRIES) -> list[str]:
    """The versions to try for REQUIREMENT, newest first: of VERSIONS (the index's), the
    final releases it allows, the newest of each MAJOR.MINOR line, at most LIMIT."""
    spec = Requirement(requirement).specifier
    allowed: list[Version] = []
    for text in versions:
        try:
            version = Version(text)
        except InvalidVersion:
            continue  # legacy version strings on old indexes: not candidates
        if not version.is_prerelease and not version.is_devrelease and spec.contains(version):
            allowed.append(version)
    newest: dict[tuple[int, int], Version] = {}
    for version in allowed:
        line = (version.major, version.minor)
        if line not in newest or version > newest[line]:
            newest[line] = version
    return [str(v) for v in sorted(newest.values(), reverse=True)][:limit]


@dataclass
class Choice:
    """What the tries found: the version locked (None: none resolved) and each refusal."""

    distribution: str
    requirement: str
    version: str | None = None
    refused: list[tuple[str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"{self.distribution} {v}: refused ({why})" for v, why in self.refused]
        if self.version:
            out.append(f"{self.distribution} {self.version}: locked ({self.requirement})")
        return out

    def absent_reason(self) -> str:
        tried = "; ".join(f"{v}: {why}" for v, why in self.refused) or "no version on the index matches it"
        return f"no version of {self.requirement!r} resolves with the release ({tried})"


def choose(requirement: str, versions: Iterable[str], resolves: Callable[[str], str | None]) -> Choice:
    """Try REQUIREMENT's candidates newest first: RESOLVES("dist==V") returns None when the
    release resolves with it pinned, else the one-line reason it does not."""
    name = distribution(requirement)
    choice = Choice(name, requirement)
    for version in candidates(requirement, versions):
        why = resolves(f"{name}=={version}")
        if why is None:
            choice.version = version
            break
        choice.refused.append((version, why))
    return choice
