"""The component model (builder/components/): every registered component is held to the same
contract, and the stages reach it only through the registry: the catalog's key, the render
(partial, files, probes, --without), the image report's probes (real commands here), the
read-back check and labels, the SBOM's marks and the conformance suite's paths."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from builder import catalog, components
from builder.catalog import policy, schema
from builder.core import grammar
from builder.core.catalog_fields import Part
from builder.core.contract import InImage, Label
from builder.core.errors import UserError
from builder.core.grammar import canonical_name
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
    assert not component.PARTIAL or (folder / component.PARTIAL).is_file()
    assert all((folder / f).is_file() for f in component.FILES)
    assert (folder / f"test_{component.NAME}.py").is_file()
    assert component.LABEL == f"dev.tfbuilder.{component.NAME}" and grammar.LABEL_KEY.fullmatch(component.LABEL)
    spec = _spec(component)  # its example is a value the catalog accepts
    for probe in component.probes(spec):
        assert re.compile(probe.pattern).groups >= 1, f"{probe.name}'s pattern captures no version"
        assert not probe.package or probe.package in component.packages(spec)
    assert set(component.packages(spec)) <= set(component.DEBIAN_PACKAGES)
    assert component.WHERE in ("before-compile", "after-compile", "core")
    # read back by its own script, by probes or by its distributions' metadata, never by none
    entry = component.report_entry(spec)
    assert entry.get("script") or entry.get("probes") or entry.get("distributions"), entry
    assert not component.REPORT or component.REPORT in component.FILES
    # what a runtime image holds is pip-installed (it has no apt step of the devel stage's)
    assert not component.RUNTIME or not component.DEBIAN_PACKAGES
    assert component.WHERE != "core" or component.RUNTIME, "the core stage is the runtime image's too"
    if component.SOURCE:  # compiled: nvbuild.sh's step for it, from a locked sdist, patches beside it
        step = (folder / "nvbuild-step.sh").read_text()
        assert "nvbuild-step.sh" in component.FILES and f"build_{component.NAME}() {{" in step
        assert component.sdist(spec) and component.SDIST_LOCK and (folder / "patches").is_dir()
        assert component.WHERE == "before-compile", "a framework patch must not rebuild it"


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
def test_each_release_that_names_it_renders_its_step_where_it_says(component, cat):
    releases = _releases_with(cat, component.NAME)
    assert releases, f"no shipped release installs {component.NAME}"
    for rel in releases:
        spec = rel.components[component.NAME]
        for variant in _buildable(rel):
            out = _render(cat, rel.name, variant)
            text = out.dockerfile
            devel, _, runtime = text.partition("\nFROM core AS runtime")
            source_at = devel.index("COPY tensorflow-source/")
            compile_at = devel.index("./nvbuild.sh --sm ")
            end = devel.index("COPY components.json " + InImage.COMPONENTS)
            step = devel.find(f"COPY components/{component.NAME}/")
            assert (step >= 0) == bool(component.PARTIAL and component.FILES)
            core_end = devel.find("\nFROM core AS devel")
            if component.WHERE == "after-compile":  # a change there never recompiles
                assert compile_at < step < end
                own = devel[compile_at:end]
            elif component.WHERE == "before-compile":  # its own layer first: a framework patch does not rebuild it
                assert devel.index("ARG COMPILE_CACHE") < step < source_at
                own = devel[step:source_at]
            else:  # the core stage: a runtime image holds it too
                assert step < (core_end if core_end >= 0 else source_at)
                own = devel[: core_end if core_end >= 0 else source_at]
            if component.SOURCE:
                assert f"./nvbuild.sh --only {component.NAME}" in own
                assert f"locks/{component.SDIST_LOCK}" in out.files and component.SOURCE in own
            assert all(f"components/{component.NAME}/{f}" in out.files for f in component.FILES)
            shipped = {f for f in out.files if f.startswith(f"components/{component.NAME}/patches/")}
            assert shipped == {f"components/{component.NAME}/patches/{p.name}" for p in component.patches(spec)}
            # what it copies in stays out of /tmp: a layer would keep the file after a RUN removes it
            assert not re.search(r"^COPY .* /tmp", own, re.M), "a component copies into /tmp"
            assert json.loads(out.files["components.json"])[component.NAME] == component.report_entry(spec)
            # build-info.json, written by the compile, records what the image holds by then
            at_compile = json.loads(out.files["components-at-compile.json"])
            assert (component.NAME in at_compile) == (component.WHERE != "after-compile")
            assert devel.index("COPY components-at-compile.json " + InImage.COMPONENTS) < compile_at
            for version in component.packages(spec).values():
                assert version in own
            assert out.meta["components"] == [c.NAME for c in components.REGISTRY if c.NAME in rel.components]
            # a runtime image holds it, and reads it back, only where it says so
            held = json.loads(out.files["runtime/components.json"])
            script = f"runtime/components/{component.NAME}/{component.REPORT}"
            if component.RUNTIME:
                assert held[component.NAME] == component.report_entry(spec)
                assert not component.REPORT or out.files[script] == out.files[script.removeprefix("runtime/")]
            else:
                assert component.NAME not in held and script not in out.files
            # (a release whose CUDA is the base's own has no runtime stage): with what nvbuild.sh
            # built, in the one layer the runtime stage copies from the compiled stage
            assert not runtime or f"COPY runtime/ /compiled{InImage.HOME}/" in devel
            assert f"components/{component.NAME}/" not in runtime


@REGISTRY
def test_without_leaves_it_out_and_says_so(component, cat):
    rel = _releases_with(cat, component.NAME)[-1]  # the newest (TensorFlow 2.21 requires no TensorBoard)
    variant = _buildable(rel)[0]
    out = _render(cat, rel.name, variant, without=(component.NAME,))
    assert component.NAME not in json.loads(out.files["components.json"])
    assert not any(k.startswith(f"components/{component.NAME}/") for k in out.files)
    assert not component.SDIST_LOCK or f"locks/{component.SDIST_LOCK}" not in out.files
    spec = rel.components[component.NAME]
    locks = [t for k, t in out.files.items() if k.startswith("locks/requirements-py")]
    for requirement in component.owned(spec):  # what it locked with the framework as itself is left out
        assert all(f"\n{requirement} " not in t for t in locks)
        assert any(f"\n{requirement} " in t for t in _render(cat, rel.name, variant).files.values())
    assert out.meta["labels"][Label.WITHOUT] == component.NAME
    assert component.NAME not in out.meta["components"]


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

    for c in (c for c in components.REGISTRY if c.PARTIAL):
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


def test_the_report_runs_a_components_own_script_and_survives_a_broken_one(tmp_path):
    good = tmp_path / "good.py"
    good.write_text("import os\ndef report():\n    return {'version': '9.1', 'pid': os.getpid()}\n")
    bad = tmp_path / "bad.py"
    bad.write_text("def report():\n    raise RuntimeError('no library')\n")
    path = tmp_path / "components.json"
    path.write_text(json.dumps({"good": {"script": str(good)}, "bad": {"script": str(bad)}}))
    found = image_report.components_report(str(path))
    assert found["good"] == {"version": "9.1", "pid": os.getpid()}  # in the report's own process
    assert found["bad"] == {"error": f"{bad}: RuntimeError: no library"}
    # an image built before scripts lists each component's probes alone
    path.write_text(json.dumps({"old": {"tool": {"command": ["true"], "pattern": "(x)", "package": ""}}}))
    assert image_report.components_report(str(path))["old"]["tool"]["error"].startswith("exit 0")


@pytest.mark.parametrize("component", [c for c in components.REGISTRY if c.REPORT], ids=lambda c: c.NAME)
def test_a_report_script_runs_here_and_reports_nothing_without_the_component(component):
    """Each report.py is standard library at import: on a machine without the component it
    says it is not there (None), never a traceback."""
    script = component.directory() / component.REPORT
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0 and out.stdout.strip() == "null", out.stderr


@REGISTRY
def test_readback_checks_the_catalogs_versions_and_labels_what_the_image_says(component, cat):
    rel = _releases_with(cat, component.NAME)[0]
    spec = rel.components[component.NAME]
    held = component.held_example(spec)
    variant = rel.variant(next(iter(rel.variants)))
    report: Any = {"version": variant.framework_version, "components": {component.NAME: held}}

    def problems(r: Any, expect: tuple[str, ...] = (component.NAME,)) -> list[str]:
        found = readback.check(r, rel, variant, [], {"xla": False}, expect_extension=False, expect_components=expect)
        return [p for p in found.problems if component.TITLE in p or component.NAME in p.lower()]

    assert problems(report) == []
    assert problems({**report, "components": {}}) == [
        f"{component.TITLE} is not installed (the image reports no {component.NAME})"
    ]
    assert problems({**report, "components": {}}, expect=()) == []  # --without
    labels = readback.measured_labels(report)
    assert labels[component.LABEL] == component.versions_text(held) != ""
    assert readback.measured_labels({**report, "components": {}})[component.LABEL] == ""
    assert component.rows(held) and all(version for _, version in component.rows(held))


@pytest.mark.parametrize("component", [c for c in components.REGISTRY if c.DEBIAN_PACKAGES], ids=lambda c: c.NAME)
def test_readback_names_a_package_at_another_version_and_a_tool_that_does_not_run(component, cat):
    rel = _releases_with(cat, component.NAME)[0]
    spec = rel.components[component.NAME]
    pinned = component.packages(spec)
    held = component.held_example(spec)
    variant = rel.variant(next(iter(rel.variants)))

    def problems(entry: Any) -> list[str]:
        r: Any = {"version": variant.framework_version, "components": {component.NAME: entry}}
        found = readback.check(
            r, rel, variant, [], {"xla": False}, expect_extension=False, expect_components=(component.NAME,)
        )
        return [p for p in found.problems if component.TITLE in p]

    first = component.probes(spec)[0]
    older = {**held, first.name: {**held[first.name], "package_version": "0.0.1-1"}}
    assert problems(older) == [
        f"{component.TITLE}: the image holds {first.package} 0.0.1-1, the catalog says {pinned[first.package]}"
    ]
    broken = {**held, first.name: {"error": "exit 127: not found"}}
    assert any("does not run (exit 127" in p for p in problems(broken))
    assert readback.measured_labels({"components": {component.NAME: held}})[component.LABEL] == " ".join(
        f"{p.name}=1.0" for p in sorted(component.probes(spec), key=lambda p: p.name)
    )


@pytest.mark.parametrize("component", [c for c in components.REGISTRY if c.DEBIAN_PACKAGES], ids=lambda c: c.NAME)
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


@pytest.mark.parametrize("component", [c for c in components.REGISTRY if c.DISTRIBUTIONS], ids=lambda c: c.NAME)
def test_the_sbom_marks_its_python_distributions_where_the_image_holds_it(component, cat):
    spec = cat.get(_releases_with(cat, component.NAME)[-1].name).components[component.NAME]
    mine = [r.split("==")[0].split(">")[0].split("<")[0] for r in component.requirements(spec)]
    assert mine and all(re.fullmatch(component.DISTRIBUTIONS, canonical_name(n)) for n in mine)
    if component.sdist(spec):
        assert re.fullmatch(component.DISTRIBUTIONS, canonical_name(component.sdist(spec)[0]))
    syft = {
        "components": [
            *({"name": n, "version": "1", "purl": f"pkg:pypi/{n}@1"} for n in mine),
            {"name": "numpy", "version": "1.26.4", "purl": "pkg:pypi/numpy@1.26.4"},
            {"name": mine[0], "version": "1", "purl": f"pkg:deb/debian/{mine[0]}@1"},  # not a Python package
        ]
    }
    marked = sbom.merge(syft, [], {component.LABEL: "x=1"})["components"]
    mark = [{"name": "dev.tfbuilder:component", "value": component.NAME}]
    assert [c.get("properties", []) for c in marked] == [mark] * len(mine) + [[], []]
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


def test_a_patch_ships_only_to_the_source_versions_its_header_names(tmp_path, monkeypatch):
    """`Versions: A B` in a patch's header (before its first `--- `) limits it to those
    versions of the component's sdist; a patch without that line ships with every version."""
    from builder.components import dali

    folder = tmp_path / "patches"
    folder.mkdir()
    (folder / "0001-all.patch").write_text("For every version.\n\n--- a/x\n+++ b/x\n")
    (folder / "0002-old.patch").write_text("Old only.\n\nVersions: 1.0 1.1\n--- a/x\n+++ b/x\nVersions: 2.0\n")
    (folder / "0003-new.patch").write_text("New only.\nVersions: 2.0\n\n--- a/x\n+++ b/x\n")
    (folder / "README.md").write_text("notes\n")
    monkeypatch.setattr(dali.Dali, "directory", classmethod(lambda cls: tmp_path))
    spec = dali.Dali.MODEL.model_validate({"version": "1.1", "cuda": "110"})
    assert [p.name for p in dali.Dali.patches(spec)] == ["0001-all.patch", "0002-old.patch", "README.md"]
    newer = dali.Dali.MODEL.model_validate({"version": "2.0", "cuda": "120"})
    assert [p.name for p in dali.Dali.patches(newer)] == ["0001-all.patch", "0003-new.patch", "README.md"]
    assert len(dali.Dali.patches()) == 4  # no spec: the whole folder


def test_each_release_gets_the_horovod_patches_made_for_its_version(cat):
    """The shipped series: every Horovod patch names its versions, and each release's
    version gets the ones written for it (0.28.1's make it build against TensorFlow 2.21)."""
    from builder.components import patch_versions
    from builder.components.horovod import Horovod

    assert all(patch_versions(p) for p in Horovod.patches() if p.suffix == ".patch")
    series = {
        name: [p.name[:4] for p in Horovod.patches(cat.get(name).components["horovod"])]
        for name in ("21.08", "21.10", "22.12", "26.11")
    }
    assert series == {
        "21.08": ["0001", "0002"],
        "21.10": ["0001", "0002"],
        "22.12": ["0001"],
        "26.11": ["0001", "0003", "0004", "0005", "0006"],
    }
