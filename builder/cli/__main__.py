"""`python3 -m builder.cli`: the same as the `builder` command."""

from builder.cli.main import run

run()
