"""Where a run reports: results (stdout: what a script reads) and messages (stderr, every
line redacted of credentials); what `build --all` reports of each variant."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from builder.errors import Reported, say


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
        say(f"  {o.release}/{o.variant}: " + (f"FAILED ({o.error})" if o.error else
                                            f"built in {o.seconds:.0f}s -> {', '.join(o.refs)}"))
    if failed:
        raise Reported(f"{len(failed)} of {len(outcomes)} variants failed")
