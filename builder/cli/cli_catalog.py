"""`builder catalog ...`: the release catalog's own commands (printing only)."""

from __future__ import annotations

import json

import typer

from builder.catalog import json_schema

catalog_app = typer.Typer(help="The release catalog: its schema, for editors and checks.", no_args_is_help=True)


@catalog_app.command("schema")
def catalog_schema() -> None:
    """Print the JSON Schema of a release file (docs/guide/private-catalog.md: editor setup)."""
    print(json.dumps(json_schema.release_file(), indent=2))
