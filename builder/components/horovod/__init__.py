"""Horovod, compiled in the image from its PyPI sdist (locked apart in one line, hash-checked,
unpacked as shipped into /opt/tensorflow/horovod-source) by `nvbuild.sh --only horovod`
(nvbuild-step.sh here, shipped beside nvbuild.sh): patches/ applied, TensorFlow, MPI and Gloo
controllers, NCCL GPU operations, the release's compute capabilities. Its install_requires
(`requires`) are locked with the framework, as the build runs without build isolation.

Its compile is the image's longest after the framework's: its layer comes first, so that
neither a framework patch nor another component rebuilds it."""

from __future__ import annotations

from typing import Annotated, Any, Optional

from pydantic import model_validator

from builder.components import Component
from builder.core.catalog_fields import Missing, Part, Refusal, StringList, Text, field, matching
from builder.core.grammar import REQUIREMENT, VERSION, printable


def _version_problem(value: str) -> Optional[str]:
    return None if VERSION.fullmatch(value) else f'{printable(value)} is not a version such as "0.22.1"'


class HorovodSpec(Part):
    """Horovod's sdist, built in the image by nvbuild.sh."""

    version: Text(_version_problem) = field(  # type: ignore[valid-type]
        'Horovod\'s version, e.g. "0.22.1" (its sdist is hash-locked).', "0.22.1"
    )
    requires: Annotated[
        StringList(  # type: ignore[valid-type]
            'requirements such as "cloudpickle"',
            matching(REQUIREMENT, 'a requirement such as "cffi" or "cffi>=1.4.0"'),
            REQUIREMENT,
        ),
        Missing("its install_requires, e.g. [cloudpickle, psutil]"),
    ] = field("Its runtime requirements, locked with the rest, e.g. [cloudpickle, psutil].", ["cloudpickle", "psutil"])

    @model_validator(mode="before")
    @classmethod
    def _not_empty(cls, data: Any) -> Any:
        if data == {}:
            raise Refusal(("", 'give {version, requires}, null for no Horovod, or "absent: WHY"'))
        return data


# what its report says it was built with, in the label's order
OPERATIONS = ("mpi_built", "gloo_built", "nccl_built", "cuda_built")


class Horovod(Component):
    NAME = "horovod"
    TITLE = "Horovod"
    MODEL = HorovodSpec
    DOC = (
        'The Horovod sdist built in the image by nvbuild.sh; null: none; "absent: WHY": none, and why '
        "(`builder show` prints it); `--without horovod` leaves it out."
    )
    EXAMPLE = {"version": "0.22.1", "requires": ["cloudpickle", "psutil"]}
    LABEL = "dev.tfbuilder.horovod"  # "0.22.1 (mpi, gloo, nccl, cuda)": what it was built with
    WHERE = "before-compile"
    ORDER = 10  # the longest compile of the components: its layer first
    RUNTIME = True
    FILES = ("nvbuild-step.sh", "nvcc-wrapper.sh", "report.py")
    REPORT = "report.py"
    SOURCE = "/opt/tensorflow/horovod-source"
    SDIST_LOCK = "horovod.txt"
    # the devel stage's toolchain for it: CMake, and Open MPI's headers for its MPI controller
    BUILD_PACKAGES = ("cmake", "libopenmpi-dev")
    # Open MPI at run time: mpi_lib.so links libmpi, and mpirun launches (horovodrun uses it)
    RUNTIME_PACKAGES = ("openmpi-bin",)

    @classmethod
    def requirements(cls, spec: Any) -> tuple[str, ...]:
        return tuple(spec.requires)

    @classmethod
    def owned(cls, spec: Any) -> tuple[str, ...]:
        return ()  # its install_requires serve it, and whatever else needs them

    @classmethod
    def sdist(cls, spec: Any) -> tuple[str, str] | None:
        return ("horovod", spec.version)

    @classmethod
    def held_example(cls, spec: Any) -> dict[str, Any]:
        return {"version": spec.version, "path": "/usr/lib/python3/dist-packages/horovod", "patches": []} | {
            op: True for op in OPERATIONS
        }

    @classmethod
    def versions_text(cls, found: dict[str, Any]) -> str:
        if not found:
            return ""
        ops = [op.removesuffix("_built") for op in OPERATIONS if found.get(op) is True]
        return f"{found.get('version')} ({', '.join(ops)})"

    @classmethod
    def rows(cls, found: dict[str, Any]) -> list[tuple[str, str]]:
        return [("horovod", str(found.get("version") or f"does not load: {found.get('error', '?')}"))]

    @classmethod
    def problems(cls, spec: Any, found: dict[str, Any] | None) -> list[str]:
        if not found or not found.get("version"):
            return [f"{cls.TITLE} is not installed (the image reports no {cls.NAME})"]
        if spec is not None and found.get("version") != spec.version:
            return [f"the image holds Horovod {found.get('version')}, the catalog says {spec.version}"]
        return []


COMPONENT = Horovod
