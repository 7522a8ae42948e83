"""Nsight Systems (`nsys`) and Nsight Compute (`ncu`), the profilers NGC's images ship, from
Debian's non-free archive: the toolkit's own versions (bullseye: 2020.4.3.7 and 2020.3.1.4
for CUDA 11.2; trixie: 2023.4.4.54 and 2024.1.1.4 for CUDA 12.4).

Debian splits each into a command-line `-target` package and a GUI package. The devel image
gets the two `-target` packages, plus from the GUI packages only what the command lines need
(install-nsight.sh): nsys's report importer and its libraries, and ncu's stock sections."""

from __future__ import annotations

from typing import Any

from builder.components import Component, Probe
from builder.core.catalog_fields import DebianVersion, Part, field


class NsightSpec(Part):
    """The Debian packages' exact versions (the release's toolkit: `apt-cache policy nsight-systems-target`)."""

    systems: DebianVersion = field(
        'nsight-systems-target\'s version, e.g. "2020.4.3.7~11.2.2-3+deb11u3".', "2020.4.3.7~11.2.2-3+deb11u3"
    )
    compute: DebianVersion = field(
        'nsight-compute-target\'s version, e.g. "2020.3.1.4~11.2.2-3+deb11u3".', "2020.3.1.4~11.2.2-3+deb11u3"
    )


class Nsight(Component):
    NAME = "nsight"
    TITLE = "Nsight Systems and Nsight Compute"
    MODEL = NsightSpec
    DOC = (
        "The profilers nsys and ncu in the devel image, from Debian non-free at these versions; "
        'null or "absent: WHY": none; `--without nsight` leaves them out.'
    )
    EXAMPLE = {"systems": "2020.4.3.7~11.2.2-3+deb11u3", "compute": "2020.3.1.4~11.2.2-3+deb11u3"}
    LABEL = "dev.tfbuilder.nsight"  # "ncu=2020.3.1.0 nsys=2020.4.3.7": what the tools say they are
    FILES = ("install-nsight.sh",)
    DEBIAN_PACKAGES = ("nsight-systems-target", "nsight-compute-target")

    @classmethod
    def packages(cls, spec: Any) -> dict[str, str]:
        return dict(zip(cls.DEBIAN_PACKAGES, (spec.systems, spec.compute)))

    @classmethod
    def probes(cls, spec: Any) -> tuple[Probe, ...]:
        return (
            Probe("nsys", ("nsys", "--version"), r"version ([0-9][0-9.]*)", "nsight-systems-target"),
            Probe("ncu", ("ncu", "--version"), r"Version ([0-9][0-9.]*)", "nsight-compute-target"),
        )


COMPONENT = Nsight
