"""Checks of a derived image on top of its parent's suite: what it says it added is there."""

import json
import re

import pytest

from builder import components
from builder.core.contract import InImage, Label


@pytest.fixture(scope="module")
def derived(labels):
    if not labels.get(Label.PARENT):
        pytest.skip("not a derived image")
    return labels


def test_patches_are_recorded_in_labels_and_build_info(derived, build_info, host):
    recorded = json.loads(derived[Label.PATCHES])
    ext = build_info.get("extension") or {}
    assert ext.get("patches", []) == recorded
    for p in recorded:
        f = host.file(f"{InImage.PATCHES}/{p['name']}")
        assert f.is_file and host.check_output(f"sha256sum {f.path}").split()[0] == p["sha256"]
    assert bool(ext.get("modified_files")) == bool(recorded)
    # Every file a patch touches, added files included, is recorded as modified.
    for p in recorded:
        text = host.file(f"{InImage.PATCHES}/{p['name']}").content_string
        for path in re.findall(r"^\+\+\+ (\S+)", text, re.M):
            if path != "/dev/null" and "/" in path:
                assert path.split("/", 1)[1] in ext.get("modified_files", []), path


@pytest.mark.parametrize("component", [c for c in components.REGISTRY if c.patchable()], ids=lambda c: c.NAME)
def test_component_patches_are_recorded_in_labels_and_the_report(component, derived, report, host):
    """`derive --NAME-patch`: each patch is in its label, in the component's own report (the
    patches nvbuild.sh applied) and in the image, byte for byte."""
    added = json.loads(derived.get(component.patches_label()) or "[]")
    if not added:
        pytest.skip(f"no {component.NAME} patch in this derived image")
    recorded = ((report.get("components") or {}).get(component.NAME) or {}).get("patches") or []
    for p in added:
        assert p in recorded, (p, recorded)
        digest = host.check_output(f"sha256sum {component.patches_in_image()}/{p['name']}").split()[0]
        assert digest == p["sha256"]


def test_added_packages_are_installed(derived, host):
    for pkg in filter(None, derived.get(Label.APT_PACKAGES, "").split()):
        assert host.package(pkg.split("=")[0]).is_installed, pkg
    for req in filter(None, derived.get(Label.PIP_PACKAGES, "").split()):
        name = req.split("[")[0].split("=")[0].split("<")[0].split(">")[0].split("~")[0].split("!")[0]
        assert host.run(f"python3 -m pip show {name}").rc == 0, req


def test_added_packages_are_the_resolved_ones_and_pinned(derived, host):
    """--pip was resolved against the parent's pins: what it added is installed at the
    resolved versions and pinned in turn, so a later `pip install` keeps it too."""
    added = [p for p in derived.get(Label.PIP_ADDED, "").split() if p]
    if not derived.get(Label.PIP_PACKAGES):
        pytest.skip("no --pip in this derived image")
    pins = host.file(InImage.PIP_CONSTRAINT).content_string.splitlines()
    for pin in added:
        name, version = pin.split("==")
        shown = host.run(f"python3 -m pip show {name}").stdout
        assert f"\nVersion: {version}\n" in shown, (pin, shown)
        assert pin in pins, pin
    assert host.run("python3 -m pip check").rc == 0
