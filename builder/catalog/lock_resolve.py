"""Making locks: uv resolves the catalog's requirements and hashes them (network), for
`builder lock` and for a derived image's --pip packages resolved beside its parent's pins.
Reading and checking locks, with no network, is builder/catalog/lock.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

from builder import components
from builder.catalog import tool_versions
from builder.catalog.lock import (
    HASH,
    UV_COMPILE,
    Plan,
    Target,
    entries,
    inputs_digest,
    lock_path,
    locks_dir,
    platform_for,
    read_lock,
    requirements,
    sdist_lock_path,
    verify_lock,
    verify_sdist_lock,
)
from builder.core.errors import UserError
from builder.core.grammar import canonical_name


def uv_command() -> list[str]:
    """uv as a command: the `uv` on PATH, or the one the uv package installed."""
    found = shutil.which("uv")
    if found:
        return [found]
    try:
        import uv

        return [uv.find_uv_bin()]
    except (ImportError, FileNotFoundError):
        raise UserError("uv is not installed (it resolves and hashes the locks): pip install uv") from None


def _uv_version(uv: list[str]) -> str:
    out = subprocess.run([*uv, "--version"], capture_output=True, text=True)
    return out.stdout.strip() or "uv"


def _uv_env() -> dict[str, str]:
    env = dict(os.environ)
    if not env.get("SSL_CERT_FILE") and not env.get("UV_NATIVE_TLS"):
        env["UV_NATIVE_TLS"] = "1"  # trust what this machine trusts (an intercepting proxy's CA)
    return env


def _run_uv(args: list[str], cwd: Path, what: str, verb: str = "lock") -> None:
    proc = subprocess.run(args, cwd=cwd, env=_uv_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        # uv's explanation: the error and every line of its chain of causes ("And because
        # ..."), up to its hints, as one line
        start = next((i for i, ln in enumerate(lines) if ln.startswith("error:")), None)
        wanted = [ln for ln in lines[start:] if not ln.startswith("hint:")] if start is not None else lines[-1:]
        reason = " ".join(wanted).replace("error: ", "", 1)
        raise UserError(f"uv could not {verb} {what}: {reason[:700] or f'exit {proc.returncode}'}")


def compile_lock(
    t: Target, existing: str | None = None, uv: list[str] | None = None, pinned: dict[str, str] | None = None
) -> str:
    """Resolve one triple with uv and return the lock file's text. Versions of `existing`
    (the current lock) are kept where they still fit, so a catalog edit moves only what it must.
    PINNED replaces catalog requirements (a tool's range) by the version chosen for them."""
    uv = uv or uv_command()
    platform = platform_for(t.python)
    flags = ["--python-version", t.python, "--python-platform", platform]
    asked = [(pinned or {}).get(r, r) for r in requirements(t.release, t.variant)]
    with tempfile.TemporaryDirectory(prefix="builder-lock-") as tmp:
        work = Path(tmp)
        (work / "requirements.in").write_text("\n".join(asked) + "\n")
        if existing:
            (work / "lock.txt").write_text(existing)
        _run_uv([*uv, *UV_COMPILE, *flags, "-q", "-o", "lock.txt", "requirements.in"], work, t.label)
        body = (work / "lock.txt").read_text(encoding="utf-8")
    body = _strip_header(body)
    header = [
        f"# Lock of release {t.release.name}, variant {t.variant.name}, Python {t.python} ({platform}).",
        f"# Made by `builder lock --release {t.release.name} --variant {t.variant.name}` from the catalog "
        f"with {_uv_version(uv)}:",
        f"#   uv {' '.join(UV_COMPILE)} {' '.join(flags)} requirements.in",
        "# (requirements.in: builder.catalog.lock.requirements() of the catalog). Do not edit: change the",
        "# catalog and run `builder lock`. Install: pip install --no-deps --require-hashes --no-build-isolation -r FILE",
        f"# inputs-digest: {inputs_digest(t.release, t.variant, t.python)}",
    ]
    return "\n".join(header) + "\n" + body.lstrip("\n")


# What listing a tool's versions on the index may take: the whole answer, not each read
# (a server dripping bytes would pass any per-read timeout), and at most this much of it.
INDEX_DEADLINE = 120.0
INDEX_LIMIT = 64 << 20


def index_versions(name: str) -> list[str]:
    """NAME's versions on the index uv resolves from (UV_INDEX_URL, PIP_INDEX_URL, else PyPI),
    read from its JSON simple API (PEP 691/700), within INDEX_DEADLINE and INDEX_LIMIT."""
    index = (os.environ.get("UV_INDEX_URL") or os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple").rstrip("/")
    parts = urllib.parse.urlsplit(index)
    shown = parts._replace(netloc=parts.hostname or "").geturl()  # no credentials in messages
    request = urllib.request.Request(
        f"{index}/{canonical_name(name)}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    deadline = time.monotonic() + INDEX_DEADLINE
    body = bytearray()
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # each read; the deadline: all
            while chunk := answer.read(1 << 16):
                body += chunk
                if len(body) > INDEX_LIMIT:
                    raise UserError(f"the index {shown} answered more than {INDEX_LIMIT >> 20} MiB for {name}")
                if time.monotonic() > deadline:
                    raise UserError(f"the index {shown} took over {INDEX_DEADLINE:.0f} s to list {name}")
        data = json.loads(body)
    except (OSError, ValueError) as e:
        raise UserError(f"cannot list the versions of {name} on {shown}: {e}") from None
    versions = data.get("versions") if isinstance(data, dict) else None
    if not isinstance(versions, list):
        raise UserError(f"the index {shown} lists no versions of {name} (it needs PEP 700's JSON API)")
    return [str(v) for v in versions]


def _ranged(t: Target) -> list[str]:
    """The component requirements of T's release that name a range (a tool's), in catalog order."""
    return [
        r
        for name, spec in t.release.components.items()
        for r in components.get(name).owned(spec)
        if tool_versions.exact_version(r) is None
    ]


def compile_with_tools(
    t: Target,
    existing: str | None,
    uv: list[str],
    log: Callable[[str], None],
    versions: Callable[[str], list[str]] = index_versions,
) -> str:
    """T's lock, each ranged tool requirement pinned to the newest of its versions that
    resolves with the release (tool_versions.choose; each try and refusal is logged); a
    UserError naming every refusal when none does."""
    pinned: dict[str, str] = {}
    text: str | None = None
    for requirement in _ranged(t):
        made: dict[str, str] = {}

        def resolves(pin: str, requirement: str = requirement, made: dict[str, str] = made) -> str | None:
            try:
                made[pin] = compile_lock(t, existing, uv, {**pinned, requirement: pin})
            except UserError as e:  # uv's reason, without the preamble each one repeats
                reason = str(e).split(": ", 1)[-1]
                return reason.replace("No solution found when resolving dependencies cause: ", "", 1)
            return None

        choice = tool_versions.choose(requirement, versions(tool_versions.distribution(requirement)), resolves)
        for line in choice.lines():
            log(f"  {t.label}: {line}")
        if choice.version is None:
            raise UserError(
                f"{t.label}: {choice.absent_reason()}; widen the range, or name the tool absent in the catalog"
            )
        pin = f"{choice.distribution}=={choice.version}"
        pinned[requirement] = pin
        text = made[pin]
    return text if text is not None else compile_lock(t, existing, uv)


def _strip_header(text: str) -> str:
    """uv's output without our header (it comes back when `existing` seeded the output file)."""
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def compile_sdist(name: str, version: str, uv: list[str] | None = None) -> str:
    """A one-line sdist lock (the image downloads it with --no-binary :all: and builds it)."""
    uv = uv or uv_command()
    with tempfile.TemporaryDirectory(prefix="builder-lock-") as tmp:
        work = Path(tmp)
        (work / "sdist.in").write_text(f"{name}=={version}\n")
        _run_uv(
            [*uv, *UV_COMPILE, "--no-deps", "--no-binary", name, "--no-annotate", "-q", "-o", "sdist.txt", "sdist.in"],
            work,
            f"{name} {version}",
        )
        found = entries((work / "sdist.txt").read_text(encoding="utf-8")).get(name)
    hashes = HASH.findall(found[1]) if found else []
    if not found or found[0] != version or not hashes:
        raise UserError(f"uv could not lock {name} {version}: no sdist with a hash on the index")
    return f"{name}=={version} {' '.join(hashes)}\n"


def resolve_beside(
    requested: list[str],
    python: str,
    constraints: str,
    what: str,
    index_url: str | None = None,
    uv: list[str] | None = None,
) -> str:
    """REQUESTED resolved by uv for an image's Python against its pins (CONSTRAINTS, the
    image's /etc/pip/constraint.txt): the hashed requirements to install with --no-deps, or
    a UserError in one line naming the conflict, before anything is built."""
    uv = uv or uv_command()
    flags = ["--python-version", python, "--python-platform", platform_for(python)]
    if index_url:
        flags += ["--index-url", index_url]
    with tempfile.TemporaryDirectory(prefix="builder-pip-") as tmp:
        work = Path(tmp)
        (work / "requested.in").write_text("\n".join(requested) + "\n")
        (work / "constraints.txt").write_text(constraints)
        _run_uv(
            [
                *uv,
                *UV_COMPILE,
                "--no-annotate",
                *flags,
                "-q",
                "-c",
                "constraints.txt",
                "-o",
                "resolved.txt",
                "requested.in",
            ],
            work,
            what,
            verb="resolve",
        )
        return (work / "resolved.txt").read_text(encoding="utf-8")


def write(
    p: Plan,
    root: Path | None = None,
    upgrade: bool = False,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
) -> tuple[list[Path], int, list[Path]]:
    """Make the plan's locks: those missing or made from other inputs (all of them with
    `upgrade`), and remove strays. Returns (written, up to date count, removed)."""
    root = root or locks_dir()
    uv: list[str] | None = None
    written, current, removed = [], 0, []
    for t in p.targets:
        path = lock_path(t.release.name, t.variant.name, t.python, root)
        old = read_lock(path)
        if old is not None and not upgrade and not verify_lock(t.release, t.variant, t.python, old):
            current += 1
            continue
        uv = uv or uv_command()
        log(f"locking {t.label} ({platform_for(t.python)})")
        text = compile_with_tools(t, None if upgrade else old, uv, log)
        bad = verify_lock(t.release, t.variant, t.python, text)
        if bad:
            raise UserError(f"the lock uv made for {t.label} {bad[0]}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for component, name, version in p.sdists:
        path = sdist_lock_path(component, name, version, root)
        old = None if upgrade else read_lock(path)
        if old is not None and not verify_sdist_lock(name, version, old):
            current += 1
            continue
        uv = uv or uv_command()
        log(f"locking {name} {version} (sdist)")
        text = compile_sdist(name, version, uv)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    expected = p.expected(root)
    for path in p.scope(root):
        if path not in expected:
            path.unlink()
            removed.append(path)
    return written, current, removed


def display_path(path: Path) -> Path:
    """PATH relative to the working directory when it is under it (as messages show it)."""
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
