"""The runtime image (pure parts): which releases can have one, its Dockerfile (the devel
image's Python packages on the offline base's bare Debian, no compiler, no toolkit), and
the plan's refusals, all before anything is built."""
from __future__ import annotations

import dataclasses

import pytest

from builder import catalog, plan as pl, runtime
from builder.base_recipe import BaseRecipe
from builder.errors import UserError
from builder.plan import render_options
from tests.unit.dockerfile_lexer import instructions

CAT = catalog.load()


def test_only_a_release_whose_cuda_libraries_all_come_from_wheels_has_one():
    assert runtime.refusal(CAT.get("26.11")) is None
    for name in ("21.06", "21.08", "21.10", "22.12", "23.03"):
        why = runtime.refusal(CAT.get(name))
        assert why and why.startswith(f"release {name} has no runtime image: TensorFlow loads its cuda_runtime, cublas")
        assert "\n" not in why


def test_the_runtime_dockerfile_copies_the_devel_images_packages_onto_bare_debian():
    rel = CAT.get("26.11")
    text = runtime.render(rel, rel.variants["tf2-py3"])
    steps = [(i.cmd, i.args) for i in instructions(text)]
    froms = [args for name, args in steps if name == "FROM"]
    assert froms == ["${DEVEL_IMAGE} AS devel", "${RUNTIME_BASE}"]
    assert f"ARG RUNTIME_BASE={BaseRecipe(rel.offline).rootfs_image}" in text
    assert "ARG DEVEL_IMAGE=local/tensorflow:26.11-tf2-py3" in text
    installs = [args for name, args in steps if name == "RUN" and "apt-get install" in args]
    assert len(installs) == 1
    for absent in ("nvidia-cuda-toolkit", "g++", "gcc", "build-essential", "cmake", "nvcc"):
        assert absent not in installs[0], absent
    assert "python3.13" in installs[0]
    copies = [args for name, args in steps if name == "COPY"]
    assert "--from=devel /usr/local/lib/python3.13/dist-packages/ /usr/local/lib/python3.13/dist-packages/" in copies
    assert not any("nvbuild.sh" in c or "tensorflow-source" in c for c in copies)
    # the devel image's environment and the runtime's own name
    assert 'TF_USE_LEGACY_KERAS="1"' in text and 'TF_CUDA_COMPUTE_CAPABILITIES="6.0,6.1,7.0,7.5,8.0,8.6,8.9,9.0"' in text
    assert 'org.opencontainers.image.version="26.11-tf2-py3-runtime"' in text
    assert 'dev.tfbuilder.runtime-of="${DEVEL_IMAGE}"' in text
    # it stands on the offline base's Debian, whatever base the devel image was asked for
    for base in ("auto", "offline"):
        rendered = runtime.render(rel, rel.variants["tf2-py3"], dataclasses.replace(render_options(rel), base=base))
        assert 'dev.tfbuilder.base="offline"' in rendered, base


def test_the_committed_runtime_dockerfile_is_the_render():
    from builder import paths

    rel = CAT.get("26.11")
    committed = paths.project_root() / "dockerfiles" / "26.11" / "tf2-py3.runtime.Dockerfile"
    assert committed.read_text() == runtime.render(rel, rel.variants["tf2-py3"])
    assert not list((paths.project_root() / "dockerfiles" / "21.08").glob("*.runtime.Dockerfile"))


def test_runtime_refs_follow_the_devel_refs():
    assert runtime.refs_for(["r/tf:26.11-tf2-py3", "r/tf:26.11-tf2-py3-b1"]) == [
        "r/tf:26.11-tf2-py3-runtime", "r/tf:26.11-tf2-py3-b1-runtime"]


@pytest.mark.parametrize("kw,message", [
    ({"release": "21.08"}, "--runtime: release 21.08 has no runtime image: "),
    ({"release": "26.11", "base": "upstream"}, "--runtime stands on the offline base's Debian: give --base offline"),
    ({"release": "26.11", "all_variants": True}, "--runtime builds one variant's runtime image: give --variant"),
])
def test_the_plan_refuses_what_cannot_have_a_runtime_image(kw, message):
    with pytest.raises(UserError) as err:
        pl.plan_build(CAT, pl.BuildArgs(**{"build_id": "b1", "runtime": True, **kw}))
    assert str(err.value).startswith(message)


def test_the_plan_keeps_the_runtime_request():
    plan = pl.plan_build(CAT, pl.BuildArgs(release="26.11", build_id="b1", runtime=True))
    assert plan.runtime and [v.variant.name for v in plan.variants] == ["tf2-py3"]
    assert not pl.plan_build(CAT, pl.BuildArgs(release="26.11", build_id="b1")).runtime
