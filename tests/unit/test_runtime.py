"""The runtime image (pure parts): which releases can have one, its Dockerfile (the devel
image's Python packages on the offline base's bare Debian, no compiler, no toolkit), and
the plan's refusals, all before anything is built."""

from __future__ import annotations

import dataclasses

import pytest

from builder import catalog
from builder import plan as pl
from builder.catalog import policy
from builder.core.errors import UserError
from builder.image import runtime_image
from builder.render import render, render_options
from builder.render.base_recipe import BaseRecipe
from tests.unit.dockerfile_lexer import instructions

CAT = catalog.load()


def test_only_a_release_whose_cuda_libraries_all_come_from_wheels_has_one():
    assert policy.why_no_runtime_image(CAT.get("26.11")) is None
    for name in ("21.06", "21.08", "21.10", "22.12", "23.03"):
        why = policy.why_no_runtime_image(CAT.get(name))
        assert why and why.startswith(f"release {name} has no runtime image: TensorFlow loads its cuda_runtime, cublas")
        assert "\n" not in why


def stages(text: str) -> dict[str, list[tuple[str, str]]]:
    """Stage name -> its instructions (FROM first)."""
    out: dict[str, list[tuple[str, str]]] = {}
    name = ""
    for i in instructions(text):
        if i.cmd == "FROM":
            name = i.args.split()[-1]
            out[name] = []
        if name:
            out[name].append((i.cmd, i.args))
    return out


def test_a_release_with_cuda_from_wheels_is_core_devel_and_runtime_stages_of_one_dockerfile():
    rel = CAT.get("26.11")
    text = render(rel, rel.variants["tf2-py3"], dataclasses.replace(render_options(rel), base="offline")).dockerfile
    st = stages(text)
    assert [s[0][1] for s in st.values()] == [
        "${BASE_IMAGE} AS core",
        "core AS devel",
        "devel AS compiled",
        "core AS runtime",
    ]
    apt = lambda name: " ".join(a for c, a in st[name] if c == "RUN" and "apt-get install" in a)  # noqa: E731
    # core: Python and the locked wheels (two layers), nothing to compile with
    assert "python3-pip" in apt("core")
    for absent in ("nvidia-cuda-toolkit", "g++", "build-essential", "python3-dev"):
        assert absent not in apt("core"), absent
    pip = [a for c, a in st["core"] if c == "RUN" and "pip install" in a]
    assert len(pip) == 4 and "register-gpu-wheels" in pip[-1]
    # devel: the toolkit where the base has no nvcc, the toolchain, the compile
    assert "nvidia-cuda-toolkit g++ g++-13" in apt("devel") and "build-essential" in apt("devel")
    assert any("nvbuild.sh" in a for c, a in st["devel"] if c == "RUN")
    # runtime: core plus what nvbuild.sh installed; never the devel image's packages wholesale
    copies = [a for c, a in st["runtime"] if c == "COPY"]
    assert copies[0] == "--from=compiled /compiled/ /"
    assert not any("dist-packages" in c or "nvbuild.sh" in c or "tensorflow-source" in c for c in copies)
    assert not [a for c, a in st["runtime"] if c == "RUN"]
    assert (
        'TF_USE_LEGACY_KERAS="1"' in text
        and 'TF_CUDA_COMPUTE_CAPABILITIES="6.0,6.1,7.0,7.5,8.0,8.6,8.9,9.0,10.0,12.0"' in text
    )
    labels = " ".join(a for c, a in st["runtime"] if c == "LABEL")
    assert 'org.opencontainers.image.version="26.11-tf2-py3-runtime"' in labels
    assert 'dev.tfbuilder.runtime-of="${DEVEL_IMAGE}"' in labels and 'dev.tfbuilder.base="offline"' in labels


def test_its_base_is_bare_and_the_other_releases_keep_one_stage_on_a_toolkit_base():
    rel = CAT.get("26.11")
    bare = BaseRecipe.for_release(rel).dockerfile()
    assert "nvidia-cuda-toolkit" not in bare and "python3.13" in bare and "/usr/local/cuda/version.txt" not in bare
    old = CAT.get("21.08")
    assert "nvidia-cuda-toolkit" in BaseRecipe.for_release(old).dockerfile()
    text = render(old, old.variants["tf2-py3"], render_options(old)).dockerfile
    assert [i.args for i in instructions(text) if i.cmd == "FROM"] == ["${BASE_IMAGE}"]


def test_the_committed_dockerfile_holds_the_runtime_stage():
    from builder.core import paths

    committed = paths.project_root() / "dockerfiles" / "26.11" / "tf2-py3.Dockerfile"
    assert "FROM core AS runtime" in committed.read_text()
    assert not list((paths.project_root() / "dockerfiles").glob("*/*.runtime.Dockerfile"))


def test_runtime_refs_follow_the_devel_refs():
    assert runtime_image.refs_for(["r/tf:26.11-tf2-py3", "r/tf:26.11-tf2-py3-b1"]) == [
        "r/tf:26.11-tf2-py3-runtime",
        "r/tf:26.11-tf2-py3-b1-runtime",
    ]


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"release": "21.08"}, "--runtime: release 21.08 has no runtime image: "),
        (
            {"release": "26.11", "base": "upstream"},
            "--runtime stands on the offline base's Debian: give --base offline",
        ),
        ({"release": "26.11", "all_variants": True}, "--runtime builds one variant's runtime image: give --variant"),
    ],
)
def test_the_plan_refuses_what_cannot_have_a_runtime_image(kw, message):
    with pytest.raises(UserError) as err:
        pl.plan_build(CAT, pl.BuildArgs(**{"build_id": "b1", "runtime": True, **kw}))
    assert str(err.value).startswith(message)


def test_the_plan_keeps_the_runtime_request():
    plan = pl.plan_build(CAT, pl.BuildArgs(release="26.11", build_id="b1", runtime=True))
    assert plan.runtime and [v.variant.name for v in plan.variants] == ["tf2-py3"]
    assert not pl.plan_build(CAT, pl.BuildArgs(release="26.11", build_id="b1")).runtime


def test_the_wheel_layers_take_every_locked_package_exactly_once():
    """The core stage's awk programs, run on the release's real lock: each package in one
    layer, none left out, TensorFlow and the largest NVIDIA libraries apart."""
    import re
    import subprocess

    from builder.catalog import lock

    rel = CAT.get("26.11")
    text = render(rel, rel.variants["tf2-py3"], render_options(rel)).dockerfile
    programs = re.findall(r"awk '([^']*)' \"\$lock\"", text)
    assert len(programs) == 4
    for python in policy.pythons_for(rel, rel.variants["tf2-py3"]):
        path = lock.lock_path(rel.name, "tf2-py3", python)
        entries = re.findall(r"^([A-Za-z0-9][\w.-]*)==", path.read_text(), re.M)
        layers = [
            re.findall(
                r"^([A-Za-z0-9][\w.-]*)==",
                subprocess.run(["awk", prog, str(path)], capture_output=True, text=True, check=True).stdout,
                re.M,
            )
            for prog in programs
        ]
        assert sorted(sum(layers, [])) == sorted(entries), python
        assert layers[0] == ["tensorflow"] and "nvidia-cudnn-cu12" in layers[1] and "nvidia-cublas-cu12" in layers[2]


def test_collect_compiled_takes_what_pip_installed_from_local_wheels_only(tmp_path):
    """templates/collect-compiled, run on a site directory holding one distribution pip
    installed from a local wheel (what nvbuild.sh installs: the extension, Horovod, a
    TensorFlow built from source) and one from an index (the lock's): only the first is
    copied, every file of its RECORD, under its own absolute path."""
    import json
    import subprocess
    import sys

    from builder.core import paths

    site = tmp_path / "site"

    def dist(name: str, origin: dict | None) -> None:
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(f"NAME = {name!r}\n")
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        files = [f"{name}/__init__.py", f"{info.name}/METADATA", f"{info.name}/RECORD"]
        if origin is not None:
            (info / "direct_url.json").write_text(json.dumps(origin))
            files.append(f"{info.name}/direct_url.json")
        (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))

    dist("tfext", {"url": "file:///tmp/pip/tfext-1.0-cp313-cp313-linux_x86_64.whl", "archive_info": {}})
    dist("tensorflow", None)  # from the index, by the lock
    dist("editable", {"url": "file:///src", "dir_info": {"editable": True}})
    dest = tmp_path / "compiled"
    out = subprocess.run(
        [sys.executable, "-S", str(paths.templates_dir() / "collect-compiled"), str(dest)],
        env={"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    copied = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    inside = str(site.resolve()).lstrip("/")
    assert copied == sorted(
        f"{inside}/{f}"
        for f in (
            "tfext/__init__.py",
            "tfext-1.0.dist-info/METADATA",
            "tfext-1.0.dist-info/RECORD",
            "tfext-1.0.dist-info/direct_url.json",
        )
    )
    assert "collect-compiled: tfext 1.0" in out.stdout and "tensorflow" not in out.stdout
