"""NVIDIA DALI from its PyPI wheel (locked with the framework), and its TensorFlow plugin
compiled in the image against the installed TensorFlow by `nvbuild.sh --only dali`
(nvbuild-step.sh here, shipped beside nvbuild.sh) from the plugin's PyPI sdist (locked apart in one line, hash-checked, unpacked as shipped into
/opt/tensorflow/dali-tf-plugin-source; nvbuild.sh applies patches/ of this folder, as
/opt/tensorflow/patches/dali/, then the ones a derived image adds).

The plugin is compiled before the framework's compile, in its own layer: a framework patch
does not rebuild it. Both are pip-installed, so a runtime image holds them too."""

from __future__ import annotations

import re
from typing import Any, Optional

from builder.components import Component
from builder.core.catalog_fields import Part, Text, field
from builder.core.grammar import VERSION, printable


def _version_problem(value: str) -> Optional[str]:
    return None if VERSION.fullmatch(value) else f'{printable(value)} is not a version such as "1.34.0"'


def _flavour_problem(value: str) -> Optional[str]:
    if re.fullmatch(r"1[0-9]{2}", value):
        return None
    return f'{printable(value)} is not a DALI wheel flavour such as "110" or "120"'


class DaliSpec(Part):
    """DALI's version and its wheels' CUDA flavour ("110": nvidia-dali-cuda110 and
    nvidia-dali-tf-plugin-cuda110)."""

    version: Text(_version_problem) = field('DALI\'s version, e.g. "1.34.0".', "1.34.0")  # type: ignore[valid-type]
    cuda: Text(_flavour_problem) = field(  # type: ignore[valid-type]
        'The wheel\'s CUDA flavour (nvidia-dali-cuda{cuda}): "110" or "120".', "110"
    )

    @property
    def package(self) -> str:
        """DALI's own distribution (its wheel is in the release's lock)."""
        return f"nvidia-dali-cuda{self.cuda}"

    @property
    def wheel(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def plugin(self) -> str:
        """The plugin's distribution (its sdist is locked apart)."""
        return f"nvidia-dali-tf-plugin-cuda{self.cuda}"


class Dali(Component):
    NAME = "dali"
    TITLE = "NVIDIA DALI"
    MODEL = DaliSpec
    DOC = (
        "NVIDIA DALI's wheel and its TensorFlow plugin, compiled in the image by `nvbuild.sh --only dali`; "
        'null or "absent: WHY" as for horovod; `--without dali` leaves it out.'
    )
    EXAMPLE = {"version": "1.34.0", "cuda": "110"}
    LABEL = "dev.tfbuilder.dali"  # "1.34.0 (TensorFlow plugin 1.34.0)": what the image imports
    WHERE = "before-compile"
    RUNTIME = True
    FILES = ("nvbuild-step.sh", "report.py")
    REPORT = "report.py"
    SOURCE = "/opt/tensorflow/dali-tf-plugin-source"
    SDIST_LOCK = "dali-tf-plugin.txt"
    DISTRIBUTIONS = r"nvidia-dali-(?:tf-plugin-)?cuda[0-9]+"

    @classmethod
    def requirements(cls, spec: Any) -> tuple[str, ...]:
        return (spec.wheel,)

    @classmethod
    def sdist(cls, spec: Any) -> tuple[str, str] | None:
        return (spec.plugin, spec.version)

    @classmethod
    def versions_text(cls, found: dict[str, Any]) -> str:
        if not found:
            return ""
        plugin = f"TensorFlow plugin {found['plugin']}" if found.get("plugin") else "no TensorFlow plugin"
        return f"{found.get('version')} ({plugin})"

    @classmethod
    def held_example(cls, spec: Any) -> dict[str, Any]:
        return {"version": spec.version, "plugin": spec.version, "patches": []}

    @classmethod
    def rows(cls, found: dict[str, Any]) -> list[tuple[str, str]]:
        if found.get("error"):
            return [("dali", f"does not load: {found['error']}")]
        plugin = found.get("plugin") or f"does not load: {found.get('plugin_error', '?')}"
        return [("dali", str(found.get("version") or "?")), ("dali_tf_plugin", plugin)]

    @classmethod
    def problems(cls, spec: Any, found: dict[str, Any] | None) -> list[str]:
        if not found:
            return [f"{cls.TITLE} is not installed (the image reports no {cls.NAME})"]
        if spec is None:
            return []
        out = []
        if found.get("version") != spec.version:
            out.append(f"the image holds DALI {found.get('version')}, the catalog says {spec.version}")
        if found.get("plugin") != spec.version:
            out.append(
                f"DALI's TensorFlow plugin {found.get('plugin') or 'does not load'} "
                f"({found.get('plugin_error') or 'the catalog says ' + spec.version})"
            )
        return out


COMPONENT = Dali
