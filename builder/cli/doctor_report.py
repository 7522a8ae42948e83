"""`builder doctor`'s checks as records, and the report of them: a table for people, JSON
for scripts, and whether the machine can build."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from builder.core.errors import terminal_line
from builder.core.redact import redact

NAME_WIDTH = 18  # the report's name column


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True
    advice: str = ""
    info: bool = False  # judges nothing (a skipped check): status "info"
    # GPU side: building needs no GPU, driver or container runtime, so never required;
    # STOPS: when not ok, the images will not run on this machine's GPU (not merely slower)
    gpu: bool = False
    stops: bool = False

    @property
    def status(self) -> str:
        """ok, warn (not required or GPU side, not ok), fail (required, not ok) or info."""
        if self.info:
            return "info"
        if self.ok:
            return "ok"
        return "fail" if self.required and not self.gpu else "warn"


def gpu_check(name: str, ok: bool, detail: str, advice: str = "", stops: bool = False, info: bool = False) -> Check:
    """A GPU-side check: a warning at worst, never a reason not to build."""
    return Check(name, ok, detail, required=False, advice=advice, info=info, gpu=True, stops=stops)


def _run(*cmd: str) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def report(items: list[Check]) -> tuple[str, bool]:
    """The report's lines, each as the terminal may show it (errors.terminal_line): a fact
    read from the machine (DOCKER_HOST, an engine's error, a GPU's name) can hold
    credentials, control characters or 10 kB; none reaches the terminal as it is."""
    lines = []
    for c in items:
        mark = {"ok": "ok  ", "fail": "FAIL"}.get(c.status, "--  ")
        lines.append(f"{mark} {c.name:<{NAME_WIDTH}} {c.detail}")
        if c.advice and not c.ok:
            lines.append(f"     {'':<{NAME_WIDTH}} hint: {c.advice}")
    lines.append(summary_line(items))
    return "\n".join(terminal_line(line) for line in lines), is_healthy(items)


def summary_line(items: list[Check]) -> str:
    """The report's last line: whether this machine builds (what doctor's exit status says),
    then, apart, what the GPU warnings mean for running the images here."""
    line = (
        "ready to build"
        if is_healthy(items)
        else "not ready to build: fix the FAIL lines (bash scripts/setup.sh installs what is missing)"
    )
    gpu_warned = [c for c in items if c.gpu and c.status == "warn"]
    if any(c.stops for c in gpu_warned):
        line += " (images will not run on this machine's GPU as it is: see the GPU warnings)"
    elif gpu_warned:
        line += " (see the GPU warnings for running the images here)"
    return line


def is_healthy(items: list[Check]) -> bool:
    """Whether this machine builds: every required check passes (GPU-side checks never are)."""
    return all(c.ok for c in items if c.required and not c.info and not c.gpu)


def report_json(items: list[Check]) -> dict:
    """`builder doctor --json`: every check (name, status ok/warn/fail/info, value, advice)."""
    return {
        "healthy": is_healthy(items),
        "summary": summary_line(items),  # JSON escapes every control
        "checks": [
            {"name": c.name.strip(), "status": c.status, "value": redact(c.detail), "advice": redact(c.advice)}
            for c in items
        ],
    }
