"""The process edge of `builder`: the signal handlers installed before any work, the typer
app run, and every failure turned into one line on stderr and an exit code (by kind, see
builder.core.errors). `builder.cli.main` hands its app here; nothing here knows the commands.
"""

from __future__ import annotations

import os
import sys

import typer

# typer 0.2x vendors click; fall back to click itself on older typer.
try:
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover
    from click import exceptions as click_exc  # type: ignore[no-redef]

from builder.core import interrupts
from builder.core.errors import BuilderError
from builder.core.terminal import say


def main(app: typer.Typer, argv: list[str] | None = None) -> int:
    """Run APP on ARGV (default: sys.argv) under the one SIGINT/SIGTERM handler; the exit code."""
    restore_signals = interrupts.install()  # before any work: every cleanup runs on SIGINT/SIGTERM
    try:
        return _main(app, argv)
    finally:
        restore_signals()


def _main(app: typer.Typer, argv: list[str] | None) -> int:
    try:
        result = app(args=argv, standalone_mode=False, prog_name="builder")
        return result if isinstance(result, int) else 0
    except BuilderError as exc:  # the one family: user error, build failure, interrupt
        text = exc.report()
        if text:
            say(text)
        return exc.exit_code
    except click_exc.NoArgsIsHelpError as exc:  # bare `builder`: help on stderr
        say(exc.ctx.get_help() if exc.ctx else str(exc))
        return 2
    except (click_exc.UsageError, click_exc.ClickException) as exc:
        say(f"error: {exc.format_message()}{_old_push_hint(argv if argv is not None else sys.argv[1:])}")
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        say("interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug, not bad input: still one line unless asked for more
        if os.environ.get("BUILDER_DEBUG"):
            raise
        say(f"error: internal error: {type(exc).__name__}: {exc} (run with BUILDER_DEBUG=1 for the traceback)")
        return 1


def _old_push_hint(argv: list[str]) -> str:
    """`--push REGISTRY` (a value before, a switch now, as in buildx): say the new form."""
    i = argv.index("--push") if "--push" in argv else -1
    if 0 <= i < len(argv) - 1 and not argv[i + 1].startswith("-"):
        return (
            f" (--push is a switch: tag the image -t {argv[i + 1]}/NAME:TAG and give --push, "
            f"or give --push --registry {argv[i + 1]})"
        )
    return ""
