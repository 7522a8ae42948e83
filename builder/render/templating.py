"""The one Jinja2 environment every template is rendered with (release Dockerfiles, the
offline base's recipe, derived Dockerfiles): StrictUndefined, and the writers of
builder/core/quoting.py as filters, so nothing is pasted into a Dockerfile unchecked."""

from __future__ import annotations

import functools
from pathlib import Path

import jinja2

from builder import components
from builder.core import paths, quoting
from builder.core.contract import InImage, Label, compile_cache_mount, settings_mounts


def template_env() -> jinja2.Environment:
    """The one Jinja2 environment for every template: StrictUndefined, and the writers of
    builder/core/quoting.py as filters (`dq`, `sh`, `ref`, ...): nothing is pasted unchecked."""
    return _template_env(str(paths.templates_dir()))


@functools.lru_cache(maxsize=4)  # compiled templates are reused (a render is then ~1 ms)
def _template_env(directory: str) -> jinja2.Environment:
    env = jinja2.Environment(
        # templates/, and each component's partial as components/NAME/FILE (builder/components/)
        loader=jinja2.ChoiceLoader(
            [
                jinja2.FileSystemLoader(directory),
                jinja2.PrefixLoader({"components": jinja2.FileSystemLoader(str(Path(components.__file__).parent))}),
            ]
        ),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(quoting.FILTERS)
    # The image contract (builder/core/contract.py): templates name label keys and in-image
    # paths through these instead of spelling them.
    env.globals.update(
        label=Label, image=InImage, settings_mounts=settings_mounts, compile_cache_mount=compile_cache_mount
    )
    return env
