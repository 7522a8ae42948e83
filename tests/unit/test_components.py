"""The component model (builder/components/): every registered component is held to the same
contract, and the stages reach it only through the registry: the catalog's key, the render
(partial, files, probes, --without), the image report's probes (real commands here), the
read-back check and labels, the SBOM's marks and the conformance suite's paths."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from builder import catalog, components
from builder.catalog import policy, schema
from builder.core import grammar
from builder.core.catalog_fields import Part
from builder.core.contract import InImage, Label
from builder.core.errors import UserError
from builder.image import readback
from builder.image.conformance import runner
from builder.in_image import image_report
from builder.render import components_left_out
from builder.supply_chain import sbom

from .conftest import GOOD
from .test_render import _render

REGISTRY = pytest.mark.parametrize("component", components.REGISTRY, ids=lambda c: c.NAME)


@pytest.fixture(scope="module")
def cat():
    return catalog.load()


def _releases_with(cat, name: str) -> list[Any]:
    return [r for r in cat.releases.values() if name in r.components]


def _buildable(rel) -> list[str]:
    return [v for v in rel.variants if not policy.why_not_buildable(rel, rel.variant(v))]


def _spec(component: type[components.Component]) -> Part:
    return component.MODEL.model_validate(component.EXAMPLE)


# ---- the declaration -------------------------------------------------------------------


@REGISTRY
def test_a_component_declares_all_it_brings_in_its_folder(component):
    folder = component.directory()
    assert folder.name == component.NAME and grammar.COMPONENT.fullmatch(component.NAME)
    assert (folder / component.PARTIAL).is_file()
    assert all((folder / f).is_file() for f in component.FILES)
    assert (folder / f"test_{component.NAME}.py").is_file()
    assert component.LABEL == f"dev.tfbuilder.{component.NAME}" and grammar.LABEL_KEY.fullmatch(component.LABEL)
    spec = _spec(component)  # its example is a value the catalog accepts
    for probe in component.probes(spec):
        assert re.compile(probe.pattern).groups >= 1, f"{probe.name}'s pattern captures no version"
        assert not probe.package or probe.package in component.packages(spec)
    assert set(component.packages(spec)) <= set(component.DEBIAN_PACKAGES)


def test_the_registry_finds_every_component_folder():
    folders = sorted(p.name for p in Path(components.__file__).parent.iterdir() if (p / "__init__.py").is_file())
    assert list(components.NAMES) == folders


@REGISTRY
def test_the_catalog_schema_has_its_key(component):
    props = schema.ReleaseDoc.model_json_schema()["properties"]
    assert component.NAME in props and props[component.NAME]["description"] == component.DOC
    assert component.NAME in catalog.TOP_KEYS


@REGISTRY
def test_a_release_may_name_it_refuse_it_or_say_why_not(component, make_catalog):
    example = json.dumps(component.EXAMPLE)  # JSON is YAML
    good = make_catalog({"30.01.yaml": GOOD + f"{component.NAME}: {example}\n"})
    assert catalog.load(good).get("30.01").components[component.NAME] == _spec(component)
    absent = make_catalog({"30.01.yaml": GOOD + f'{component.NAME}: "absent: not for this fleet"\n'})
    rel = catalog.load(absent).get("30.01")
    assert component.NAME not in rel.components and rel.components_absent[component.NAME] == "not for this fleet"
    bad = {k: "not a version!" for k in component.EXAMPLE}
    bad_dir = make_catalog({"30.01.yaml": GOOD + f"{component.NAME}: {json.dumps(bad)}\n"})
    with pytest.raises(catalog.CatalogError) as err:
        catalog.load(bad_dir)
    found = err.value.report()
    for key in bad:  # every field's mistake, with its path
        assert f"{component.NAME}.{key}:" in found, found


# ---- rendering -------------------------------------------------------------------------


@REGISTRY
def test_each_release_that_names_it_renders_its_step_after_the_compile(component, cat):
    releases = _releases_with(cat, component.NAME)
    assert releases, f"no shipped release installs {component.NAME}"
    for rel in releases:
        for variant in _buildable(rel):
            out = _render(cat, rel.name, variant)
            text = out.dockerfile
            devel = text.split("\nFROM core AS runtime", 1)[0]
            compile_at = devel.index("./nvbuild.sh --sm ")
            step = devel.index("COPY components.json " + InImage.COMPONENTS)
            assert compile_at < step, "a component's step must come after the compile (it never recompiles)"
            assert all(f"components/{component.NAME}/{f}" in out.files for f in component.FILES)
            # what it copies in stays out of /tmp: a layer would keep the file after a RUN removes it
            assert not re.search(r"^COPY .* /tmp", devel[compile_at:step], re.M), "a component copies into /tmp"
            probes = json.loads(out.files["components.json"])
            assert set(probes[component.NAME]) == {p.name for p in component.probes(rel.components[component.NAME])}
            for version in component.packages(rel.components[component.NAME]).values():
                assert version in devel[compile_at:step]
            assert out.meta["components"] == [c.NAME for c in components.REGISTRY if c.NAME in rel.components]
            # the runtime stage carries none of it
            runtime = text.split("\nFROM core AS runtime", 1)[1] if "FROM core AS runtime" in text else ""
            assert "components" not in runtime


@REGISTRY
def test_without_leaves_it_out_and_says_so(component, cat):
    rel = _releases_with(cat, component.NAME)[0]
    variant = _buildable(rel)[0]
    out = _render(cat, rel.name, variant, without=(component.NAME,))
    assert json.loads(out.files["components.json"]) == {}
    assert not any(k.startswith(f"components/{component.NAME}/") for k in out.files)
    assert out.meta["labels"][Label.WITHOUT] == component.NAME
    assert out.meta["components"] == []


@REGISTRY
def test_without_on_a_release_that_lacks_it_is_one_line(component, cat, make_catalog):
    directory = make_catalog({"30.01.yaml": GOOD + f'{component.NAME}: "absent: no fleet needs it"\n'})
    rel = catalog.load(directory).get("30.01")
    with pytest.raises(UserError) as err:
        components_left_out(rel, (component.NAME,))
    assert "\n" not in str(err.value) and "(no fleet needs it)" in str(err.value)


def test_the_partials_are_rendered_by_the_same_checked_environment():
    """A partial sees the writers (`sh`, `dq`): a hostile version never reaches a RUN line raw."""
    from builder.render.templating import template_env

    for c in components.REGISTRY:
        source = (c.directory() / c.PARTIAL).read_text()
        for match in re.finditer(r"\{\{\s*spec\.(\w+)\s*([^}]*)\}\}", source):
            assert "|" in match.group(2), f"{c.NAME}: spec.{match.group(1)} is pasted without a writer"
        assert template_env().get_template(f"components/{c.NAME}/{c.PARTIAL}")


# ---- what the image says ---------------------------------------------------------------


def _dpkg_version(package: str) -> str:
    return subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True, check=True
    ).stdout


def test_the_report_runs_each_probe_and_asks_dpkg(tmp_path, monkeypatch):
    """Real commands: a tool on PATH that prints its version, dpkg's own record of a package."""
    tool = tmp_path / "bin" / "fancytool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho 'Fancy Tool version 7.3.1-abc (build 9)'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    probes = {
        "fancy": {
            "fancytool": {"command": ["fancytool", "--version"], "pattern": r"version ([0-9.]+)", "package": "dpkg"},
            "missing": {"command": ["no-such-tool-here"], "pattern": "(x)", "package": ""},
            "silent": {"command": ["true"], "pattern": r"version (\d+)", "package": ""},
        }
    }
    path = tmp_path / "components.json"
    path.write_text(json.dumps(probes))
    found = image_report.components_report(str(path))["fancy"]
    assert found["fancytool"] == {
        "path": str(tool),
        "version": "7.3.1",
        "package_version": _dpkg_version("dpkg"),
    }
    assert found["missing"]["error"] == "no-such-tool-here is not on PATH"
    assert found["silent"]["error"].startswith("exit 0")
    assert image_report.components_report(str(tmp_path / "none.json")) == {}


@REGISTRY
def test_readback_checks_the_catalogs_versions_and_labels_what_the_tools_say(component, cat):
    rel = _releases_with(cat, component.NAME)[0]
    spec = rel.components[component.NAME]
    pinned = component.packages(spec)
    held = {
        p.name: {"version": "1.2.3", "path": f"/usr/bin/{p.name}", "package_version": pinned.get(p.package, "")}
        for p in component.probes(spec)
    }
    variant = rel.variant(next(iter(rel.variants)))
    report: Any = {"version": variant.framework_version, "components": {component.NAME: held}}

    def problems(r: Any, expect: tuple[str, ...] = (component.NAME,)) -> list[str]:
        found = readback.check(r, rel, variant, [], {"xla": False}, expect_extension=False, expect_components=expect)
        return [p for p in found.problems if component.TITLE in p]

    assert problems(report) == []
    assert problems({**report, "components": {}}) == [
        f"{component.TITLE} is not installed (the image reports no {component.NAME})"
    ]
    first = component.probes(spec)[0]
    older = {**held, first.name: {**held[first.name], "package_version": "0.0.1-1"}}
    assert problems({**report, "components": {component.NAME: older}}) == [
        f"{component.TITLE}: the image holds {first.package} 0.0.1-1, the catalog says {pinned[first.package]}"
    ]
    broken = {**held, first.name: {"error": "exit 127: not found"}}
    assert any("does not run (exit 127" in p for p in problems({**report, "components": {component.NAME: broken}}))
    assert problems({**report, "components": {}}, expect=()) == []  # --without, or a runtime image
    labels = readback.measured_labels(report)
    assert labels[component.LABEL] == " ".join(
        f"{p.name}=1.2.3" for p in sorted(component.probes(spec), key=lambda p: p.name)
    )
    assert readback.measured_labels({**report, "components": {}})[component.LABEL] == ""


@REGISTRY
def test_the_sbom_marks_its_debian_packages_where_the_image_holds_it(component):
    package = component.DEBIAN_PACKAGES[0]
    syft = {
        "components": [
            {"name": package, "version": "1-1", "purl": f"pkg:deb/debian/{package}@1-1"},
            {"name": "bash", "version": "5.1-2", "purl": "pkg:deb/debian/bash@5.1-2"},
        ]
    }
    marked = sbom.merge(syft, [], {component.LABEL: "x=1"})
    props = {c["name"]: c.get("properties", []) for c in marked["components"]}
    assert props[package] == [{"name": "dev.tfbuilder:component", "value": component.NAME}]
    assert props["bash"] == []
    unmarked = sbom.merge(syft, [], {component.LABEL: ""})  # --without: the label is empty
    assert all(not c.get("properties") for c in unmarked["components"])


def test_the_conformance_suite_runs_each_components_tests():
    cmd = runner.command("img", [], None, "c")
    at = cmd.index("-q") + 1  # the paths pytest collects: the suite, then each component's tests
    files = [str(p) for p in components.conformance_files()]
    assert cmd[at : at + 1 + len(files)] == [str(runner.SUITE), *files]


@REGISTRY
def test_its_shell_files_parse(component):
    for name in component.FILES:
        if name.endswith(".sh"):
            out = subprocess.run(["bash", "-n", str(component.directory() / name)], capture_output=True, text=True)
            assert out.returncode == 0, out.stderr
