"""Where a run reports: results (stdout: what a script reads) and messages (stderr, every
line redacted of credentials); what `build --all` reports of each variant."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from builder.core.errors import Reported
from builder.core.terminal import say


@dataclass
class Output:
    result: Callable[[str], None] = print
    say: Callable[[str], None] = say


@dataclass
class BuildOutcome:
    release: str
    variant: str
    image_id: str = ""
    refs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""


def summary(outcomes: list[BuildOutcome], skipped: int, say: Callable[[str], None]) -> None:
    """`build --all`'s last lines: what was built, what failed (Reported when any did)."""
    failed = [o for o in outcomes if o.error]
    say(f"summary: {len(outcomes) - len(failed)} built, {len(failed)} failed, {skipped} skipped")
    for o in outcomes:
        say(
            f"  {o.release}/{o.variant}: "
            + (f"FAILED ({o.error})" if o.error else f"built in {o.seconds:.0f}s -> {', '.join(o.refs)}")
        )
    if failed:
        raise Reported(f"{len(failed)} of {len(outcomes)} variants failed")


def human_size(n: int) -> str:
    """A byte count as people read it: 0 B, 100.0 MiB, 2.0 GiB."""
    if n < 1024:
        return f"{n} B"
    value, units = n / 1024, ["KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    return f"{value:.1f} {units[0]}"
