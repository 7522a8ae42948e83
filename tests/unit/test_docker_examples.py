"""docker-examples/Dockerfile.customtensorflow, the plain `docker build` patch path: the
patch goes where nvbuild.sh records patches (name + sha256 in the build info), no copy is
left in a /tmp layer, an empty patch stops the build, and the image gets its own build id.
(The Dockerfile is lint-checked in test_dockerfiles.py; that nvbuild.sh records what
/opt/tensorflow/patches holds is test_nvbuild_extension_driver.py's.)"""

import subprocess

import pytest

from builder import catalog
from builder.render import RenderOptions, render
from builder.render.base_recipe import BaseRecipe


@pytest.fixture(scope="module")
def dockerfile():
    rel = catalog.load().get("21.08")
    r = render(rel, rel.variant("tf2-py3"), RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag))
    return r.files["docker-examples/Dockerfile.customtensorflow"]


def instructions(text):
    """Instruction lines, continuation lines joined, comments dropped."""
    out, current = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            out.append(current.strip())
            current = ""
    return out


def test_the_patch_is_kept_where_nvbuild_records_it_and_never_in_tmp(dockerfile):
    lines = instructions(dockerfile)
    assert "COPY my-tensorflow-modifications.patch /opt/tensorflow/patches/" in lines
    assert not [line for line in lines if "/tmp" in line]
    patch_run = next(line for line in lines if "patch -p1" in line)
    nvbuild_run = next(i for i, line in enumerate(lines) if line.startswith("RUN ") and "./nvbuild.sh" in line)
    assert lines.index(patch_run) < nvbuild_run


def test_its_own_build_id(dockerfile):
    lines = instructions(dockerfile)
    assert 'ARG BUILD_ID=""' in lines
    assert "ENV NVIDIA_BUILD_ID=${BUILD_ID:-${NVIDIA_BUILD_ID}.custom}" in lines
    assert 'LABEL com.nvidia.build.id="${NVIDIA_BUILD_ID}"' in lines


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_the_patch_step_refuses_an_empty_patch(tmp_path, dockerfile, content):
    """The RUN line's shell, run as the build would, on an empty patch: it fails."""
    run = next(line for line in instructions(dockerfile) if "patch -p1" in line)
    script = run.removeprefix("RUN ").replace("/opt/tensorflow/patches/", f"{tmp_path}/")
    (tmp_path / "my-tensorflow-modifications.patch").write_text(content)
    result = subprocess.run(["sh", "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode != 0 and "my-tensorflow-modifications.patch is empty" in result.stderr


def test_the_patch_step_applies_a_patch_that_adds_a_file(tmp_path, dockerfile):
    run = next(line for line in instructions(dockerfile) if "patch -p1" in line)
    script = run.removeprefix("RUN ").replace("/opt/tensorflow/patches/", f"{tmp_path}/")
    (tmp_path / "my-tensorflow-modifications.patch").write_text("--- /dev/null\n+++ b/added.txt\n@@ -0,0 +1 @@\n+new\n")
    src = tmp_path / "src"
    src.mkdir()
    result = subprocess.run(["sh", "-c", script], capture_output=True, text=True, cwd=src)
    assert result.returncode == 0, result.stderr
    assert (src / "added.txt").read_text() == "new\n"
