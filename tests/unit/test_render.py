"""Golden-string tests of the renderer (hpccm style): exact fragments of what is rendered."""

import re
import subprocess
import sys
from dataclasses import replace

import pytest

from builder import catalog
from builder.core.errors import UserError
from builder.core.quoting import QuotingError, dockerfile_string
from builder.in_image import cuda_arch
from builder.render import RenderOptions, banner_release_line, render
from builder.render.base_recipe import BaseRecipe


@pytest.fixture(scope="module")
def cat():
    return catalog.load()


def _render(cat, release="21.08", variant="tf2-py3", **kw):
    rel = cat.get(release)
    kw.setdefault("offline_base_image", BaseRecipe(rel.offline).tag)
    return render(rel, rel.variant(variant), RenderOptions(**kw))


def test_every_image_starts_from_an_injectable_base(cat):
    lines = _render(cat).dockerfile.splitlines()
    code = [line for line in lines if line and not line.startswith("#")]
    # --base auto is the offline base on every machine: one tag, one recipe
    offline = BaseRecipe.for_release(cat.get("21.08")).tag
    assert code[:2] == [f"ARG BASE_IMAGE={offline}", "FROM ${BASE_IMAGE}"]
    upstream = [li for li in _render(cat, base="upstream").dockerfile.splitlines() if li and not li.startswith("#")]
    assert upstream[:2] == ["ARG BASE_IMAGE=nvcr.io/nvidia/cuda:11.4.1-cudnn8-devel-ubuntu20.04", "FROM ${BASE_IMAGE}"]


def test_build_parameters_and_nvbuild_line_default(cat):
    text = _render(cat).dockerfile
    assert (
        'ENV TF_CUDA_COMPUTE_CAPABILITIES="5.2,6.0,6.1,7.0,7.5,8.0,8.6" \\\n'
        '    TF_ENABLE_XLA="1" \\\n'
        '    TF_NEED_GCP="0" \\\n'
        '    TF_NEED_HDFS="0"\n'
        "\n"
        "WORKDIR /opt/tensorflow\n"
        "# COMPILE_CACHE: a shared compile cache URL (builder --compile-cache); empty builds without.\n"
        'ARG COMPILE_CACHE=""\n'
        "\n"
        "# Horovod 0.22.1: its PyPI sdist, hash-checked and unpacked as it is.\n"
    ) in text
    assert (  # Horovod first, in its own layer: neither the framework nor DALI's plugin rebuilds it
        'RUN --mount=type=cache,id=tfbuilder-nvbuild-ccache,target=/var/cache/nvbuild ./nvbuild.sh --only horovod --sm 5.2,6.0,6.1,7.0,7.5,8.0,8.6 ${COMPILE_CACHE:+--cache "$COMPILE_CACHE"}\n'
        "\n"
        "# NVIDIA DALI's TensorFlow plugin 1.34.0: its PyPI sdist, hash-checked and\n"
    ) in text
    assert (  # DALI's plugin compiled in its own layer, then the framework
        "RUN --mount=type=cache,id=tfbuilder-nvbuild-ccache,target=/var/cache/nvbuild ./nvbuild.sh --only dali\n"
        "\n"
        "# The components the image holds by now, which the compile's build-info.json records (what\n"
        "# nvbuild.sh compiled among them); all of them once the steps after the compile ran (below).\n"
        "COPY components-at-compile.json /opt/tensorflow/components.json\n"
        "COPY tensorflow-source/ /opt/tensorflow/tensorflow-source/\n"
        'RUN --mount=type=cache,id=tfbuilder-nvbuild-ccache,target=/var/cache/nvbuild ./nvbuild.sh --sm 5.2,6.0,6.1,7.0,7.5,8.0,8.6 ${COMPILE_CACHE:+--cache "$COMPILE_CACHE"}\n'
    ) in text


def test_the_framework_comes_from_the_locks_with_hash_checking(cat):
    r = _render(cat)
    assert "COPY locks/ /opt/tensorflow/locks/\n" in r.dockerfile
    assert (
        'pip install --no-cache-dir --no-deps --require-hashes --no-build-isolation $flags -r "$lock"' in r.dockerfile
    )
    assert "register-gpu-wheels" in r.dockerfile
    assert set(k for k in r.files if k.startswith("locks/")) == {
        "locks/requirements-py3.8.txt",
        "locks/requirements-py3.9.txt",
        "locks/horovod.txt",
        "locks/dali-tf-plugin.txt",
    }
    assert "tensorflow==2.5.0 \\\n" in r.files["locks/requirements-py3.9.txt"]
    assert r.files["locks/horovod.txt"].strip().splitlines()[-1].startswith("horovod==0.22.1 --hash=sha256:")
    assert "--no-binary :all:" in r.dockerfile and "/opt/tensorflow/horovod-source" in r.dockerfile
    assert any(k.startswith("components/horovod/patches/") and k.endswith(".patch") for k in r.files)


def test_unbuildable_requests_are_refused_before_anything_is_built(cat):
    with pytest.raises(UserError, match="TensorFlow 1.15.5 has no wheel for Python"):
        _render(cat, variant="tf1-py3")
    with pytest.raises(UserError, match="needs libhdfs.so from a Hadoop client"):
        _render(cat, hdfs=True)


def test_labels_claim_only_what_was_requested(cat):
    """What the image holds is read back after the build; the Dockerfile claims no version."""
    text = _render(cat).dockerfile
    assert 'dev.tfbuilder.requested-framework="tensorflow==2.5.0"' in text
    assert "dev.tfbuilder.framework-version" not in text and "org.opencontainers.image.description" not in text


def test_build_parameters_follow_options(cat):
    r = _render(cat, cuda_cc="80,70", xla=False, gcp=True)
    assert (
        'ENV TF_CUDA_COMPUTE_CAPABILITIES="7.0,8.0" \\\n'
        '    TF_ENABLE_XLA="0" \\\n'
        '    TF_NEED_GCP="1" \\\n'
        '    TF_NEED_HDFS="0"\n'
    ) in r.dockerfile
    assert (
        'RUN --mount=type=cache,id=tfbuilder-nvbuild-ccache,target=/var/cache/nvbuild ./nvbuild.sh --sm 7.0,8.0 ${COMPILE_CACHE:+--cache "$COMPILE_CACHE"}\n'
        in r.dockerfile
    )
    assert (
        'RUN --mount=type=cache,id=tfbuilder-nvbuild-ccache,target=/var/cache/nvbuild ./nvbuild.sh --only horovod --sm 7.0,8.0 ${COMPILE_CACHE:+--cache "$COMPILE_CACHE"}\n'
        in r.dockerfile
    )
    for line in (
        'dev.tfbuilder.cuda-compute-capabilities="7.0,8.0"',
        'dev.tfbuilder.xla="0"',
        'dev.tfbuilder.gcp="1"',
        'dev.tfbuilder.hdfs="0"',
    ):
        assert line in r.dockerfile


def test_local_is_probed_in_the_image(cat):
    r = _render(cat, cuda_cc="local")
    assert (
        'RUN --mount=type=cache,id=tfbuilder-nvbuild-ccache,target=/var/cache/nvbuild ./nvbuild.sh --sm local ${COMPILE_CACHE:+--cache "$COMPILE_CACHE"}\n'
        in r.dockerfile
    )
    assert 'TF_CUDA_COMPUTE_CAPABILITIES="local"' in r.dockerfile


@pytest.mark.parametrize(
    "cc,base,message",
    [
        ("9.9", "auto", "compute capability 9.9 is not a GPU architecture for CUDA 11.2"),
        ("9.9", "upstream", "compute capability 9.9 is not a GPU architecture for CUDA 11.4.1"),
        ("8.7", "auto", "compute capability 8.7 cannot be compiled for CUDA 11.2; supported: 3.5-8.6"),
        ("8.7", "offline", "(the offline base (bullseye))"),
        ("3.0", "upstream", "compute capability 3.0 cannot be compiled for CUDA 11.4.1"),
        ("x", "auto", "'x' is not a compute capability"),
    ],
)
def test_bad_compute_capabilities(cat, cc, base, message):
    with pytest.raises(UserError) as exc:
        _render(cat, cuda_cc=cc, base=base)
    assert message in str(exc.value)


def test_upstream_only_base_allows_what_its_toolkit_compiles(cat):
    assert "--sm 8.0,8.7" in _render(cat, cuda_cc="8.0,8.7", base="upstream").dockerfile


def test_env_defaults_come_after_the_compile_and_labels_last(cat):
    """Layer order: changing an env default or a label never recompiles the framework."""
    lines = [line for line in _render(cat).dockerfile.splitlines() if line and line[0].isupper()]
    nvbuild = next(i for i, line in enumerate(lines) if line.startswith("RUN ") and "./nvbuild.sh" in line)
    env7 = next(i for i, line in enumerate(lines) if line.startswith("ENV TF_ADJUST_HUE_FUSED"))
    assert nvbuild < env7
    assert lines[-1].startswith("LABEL ") and lines[-2].startswith("ENV NVIDIA_BUILD_ID=")


def test_env_overrides_are_quoted_and_recorded(cat):
    r = _render(cat, env=RenderOptions.parse_env(["TF_AUTOTUNE_THRESHOLD=1", 'MY_VAR=a "b" $HOME\\x']))
    assert 'TF_AUTOTUNE_THRESHOLD="1"' in r.dockerfile
    assert 'MY_VAR="a \\"b\\" \\$HOME\\\\x"' in r.dockerfile
    assert 'dev.tfbuilder.env-overrides="TF_AUTOTUNE_THRESHOLD,MY_VAR"' in r.dockerfile
    assert r.meta["env"]["MY_VAR"] == 'a "b" $HOME\\x'


@pytest.mark.parametrize(
    "pairs,message",
    [
        (["NOVALUE"], "--env 'NOVALUE' is not NAME=VALUE"),
        (["A-B=1"], "--env 'A-B' is not a valid environment variable name"),
    ],
)
def test_bad_env(pairs, message):
    with pytest.raises(UserError, match=message):
        RenderOptions.parse_env(pairs)


def test_build_parameters_cannot_be_set_through_env(cat):
    with pytest.raises(UserError, match="TF_ENABLE_XLA is a build parameter"):
        _render(cat, env=(("TF_ENABLE_XLA", "0"),))


def test_bases(cat):
    off = _render(cat, base="offline")
    assert off.dockerfile.count(f"ARG BASE_IMAGE={BaseRecipe(cat.get('21.08').offline).tag}\n") == 1
    assert 'dev.tfbuilder.base="offline"' in off.dockerfile
    mine = _render(cat, base="registry.example.com:5000/cuda:11.4@sha256:" + "a" * 64)
    assert "ARG BASE_IMAGE=registry.example.com:5000/cuda:11.4@sha256:" + "a" * 64 in mine.dockerfile
    assert 'dev.tfbuilder.base="custom"' in mine.dockerfile
    with pytest.raises(UserError, match="is not auto, upstream, offline or an image reference"):
        _render(cat, base="bad base")


def test_docker_examples_start_from_the_exact_tag(cat):
    r = _render(cat, repository="registry.local:5000/ml/tf")
    for name in ("Dockerfile.customtensorflow", "Dockerfile.addpackages"):
        assert (
            "ARG BASE_IMAGE=registry.local:5000/ml/tf:21.08-tf2-py3\nFROM ${BASE_IMAGE}\n"
            in r.files[f"docker-examples/{name}"]
        )
    custom = r.files["docker-examples/Dockerfile.customtensorflow"]
    assert (
        "COPY my-tensorflow-modifications.patch /opt/tensorflow/patches/\nWORKDIR /opt/tensorflow/tensorflow-source\n"
    ) in custom
    assert (
        'WORKDIR /opt/tensorflow\nARG COMPILE_CACHE=""\n'
        'RUN --mount=type=cache,id=tfbuilder-nvbuild-ccache,target=/var/cache/nvbuild ./nvbuild.sh ${COMPILE_CACHE:+--cache "$COMPILE_CACHE"}\n'
        in custom
        and custom.endswith("WORKDIR /workspace\n")
    )


def test_flags_file_per_api(cat):
    assert _render(cat).files["nvbuildopts"].splitlines()[1:] == [
        "--config=v2",
        "-c",
        "opt",
        "--config=cuda",
        "--output_filter=MATCH_NOTHING",
    ]


def _with_vendor(cat, release="21.08", **vendor):
    rel = cat.get(release)
    return replace(rel, vendor=catalog.Vendor(**vendor))


def _banner(rendered, tmp_path, build_id="b1"):
    """The entrypoint's text parts as the image shows them (10-banner.sh sourced, the .txt cat)."""
    script = tmp_path / "10-banner.sh"
    script.write_text(rendered.files["entrypoint/entrypoint.d/10-banner.sh"])
    out = subprocess.run(
        ["bash", "-c", f"source {script}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "NVIDIA_TENSORFLOW_VERSION": "21.08-tf2", "NVIDIA_BUILD_ID": build_id},
    )
    return out.stdout + rendered.files["entrypoint/entrypoint.d/15-container-copyright.txt"]


def test_the_default_image_names_no_nvidia_maker(cat, tmp_path):
    """Done-when: no image shows NVIDIA's name as its maker by default (banner, copyright
    lines, labels); TensorFlow's copyright stays, and so do NGC's interface names."""
    r = _render(cat)
    text = _banner(r, tmp_path)
    assert "tf-image-builder release 21.08-tf2 (build b1), built from the NGC TensorFlow 21.08 recipe\n" in text
    assert "Copyright 2017-2021 The TensorFlow Authors.  All rights reserved.\n" in text
    for claim in ("NVIDIA Release", "NVIDIA CORPORATION", "Container image Copyright", "modifications (c)"):
        assert claim not in text, claim
    assert "NVIDIA recommends" not in r.files["entrypoint/entrypoint.d/60-shm-check.sh"]
    labels = r.meta["labels"]
    assert labels["org.opencontainers.image.vendor"] == labels["maintainer"] == "tf-image-builder"
    assert "org.opencontainers.image.authors" not in labels and "org.opencontainers.image.url" not in labels
    assert not [v for v in labels.values() if "NVIDIA" in v.upper() and "nvidia_driver" not in v]
    assert 'org.opencontainers.image.vendor="tf-image-builder" \\\n' in r.dockerfile
    # interfaces of NGC's runtime contract, not authorship
    assert 'NVIDIA_TENSORFLOW_VERSION="21.08-tf2"' in r.dockerfile and "ENV NVIDIA_BUILD_ID=${BUILD_ID}" in r.dockerfile
    assert labels["com.nvidia.volumes.needed"] == "nvidia_driver"
    assert 'ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]' in r.dockerfile
    for name in ("21.06", "21.10", "22.12", "23.03", "26.11"):
        assert "NVIDIA" not in _render(cat, release=name).files["entrypoint/entrypoint.d/15-container-copyright.txt"]


def test_a_private_vendor_is_named_in_banner_labels_and_copyright(cat, tmp_path):
    rel = _with_vendor(
        cat,
        name="ML Platform",
        maintainer="ML Platform <mlp@example.com>",
        url="https://git.example.com/ml/images",
        copyright_holder="Example Inc",
    )
    r = render(rel, rel.variant("tf2-py3"), RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag))
    text = _banner(r, tmp_path)
    assert (
        "ML Platform release 21.08-tf2 (build b1), built from the NGC TensorFlow 21.08 recipe\n"
        "Maintainer: ML Platform <mlp@example.com>\nProject: https://git.example.com/ml/images\n"
    ) in text
    assert (
        "\nContainer image Copyright (c) 2021, Example Inc.  All rights reserved.\n"
        "Copyright 2017-2021 The TensorFlow Authors.  All rights reserved.\n"
    ) in text
    assert "NVIDIA" not in r.files["entrypoint/entrypoint.d/15-container-copyright.txt"]
    assert banner_release_line(rel, "21.08-tf2", "b1") in text
    labels = r.meta["labels"]
    assert (
        labels["org.opencontainers.image.vendor"],
        labels["org.opencontainers.image.authors"],
        labels["org.opencontainers.image.url"],
        labels["maintainer"],
    ) == (
        "ML Platform",
        "ML Platform <mlp@example.com>",
        "https://git.example.com/ml/images",
        "ML Platform <mlp@example.com>",
    )
    assert 'org.opencontainers.image.authors="ML Platform <mlp@example.com>" \\\n' in r.dockerfile


def test_vendor_texts_are_shown_verbatim_and_never_run(cat, tmp_path):
    odd = "$(touch pwned) `id` 'q' \"dq\" \\ %s %%"
    rel = _with_vendor(cat, name=odd, maintainer=odd, copyright_holder=odd)
    r = render(rel, rel.variant("tf2-py3"), RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag))
    text = _banner(r, tmp_path)
    assert f"{odd} release 21.08-tf2 (build b1)" in text and f"Maintainer: {odd}\n" in text
    assert f"Copyright (c) 2021, {odd}.  All" in text and not (tmp_path / "pwned").exists()


def test_nvidias_own_image_keeps_ngcs_words(cat, tmp_path):
    """An image the catalog says NVIDIA makes (copyright holder NVIDIA ...) prints NGC's banner as before."""
    r = render(
        rel := _with_vendor(cat, release="22.12", name="NVIDIA", copyright_holder="NVIDIA CORPORATION & AFFILIATES"),
        rel.variant("tf2-py3"),
        RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag),
    )
    assert r.files["entrypoint/entrypoint.d/15-container-copyright.txt"] == (
        "\nContainer image Copyright (c) 2022, NVIDIA CORPORATION & AFFILIATES.  All rights reserved.\n"
        "Copyright 2017-2022 The TensorFlow Authors.  All rights reserved.\n\n"
        "Various files include modifications (c) NVIDIA CORPORATION.  All rights reserved.\n"
        "NVIDIA modifications are covered by the license terms that apply to the underlying project or file.\n"
    )
    assert banner_release_line(rel, "22.12-tf2", "7") == "NVIDIA Release 22.12-tf2 (build 7)"
    assert "NVIDIA Release 21.08-tf2 (build b1)\n" in _banner(r, tmp_path)
    assert "NVIDIA recommends the use of" in r.files["entrypoint/entrypoint.d/60-shm-check.sh"]


def test_a_release_not_named_after_ngc_claims_no_recipe(cat):
    rel = replace(cat.get("21.08"), name="team-a")
    assert banner_release_line(rel, "team-a-tf2", "1") == "tf-image-builder release team-a-tf2 (build 1)"


def test_a_release_after_nvidias_last_tensorflow_container_cites_no_ngc_recipe(cat):
    """NVIDIA's TensorFlow containers stopped at 25.02: 26.11 names no NGC recipe, 25.02 does."""
    assert banner_release_line(cat.get("26.11"), "26.11-tf2", "1") == "tf-image-builder release 26.11-tf2 (build 1)"
    rel = replace(cat.get("23.03"), name="25.02")
    assert banner_release_line(rel, "25.02-tf2", "1").endswith(", built from the NGC TensorFlow 25.02 recipe")


def test_release_line_env(cat):
    assert 'NVIDIA_TENSORFLOW_VERSION="21.08-tf2"' in _render(cat).dockerfile


def test_rendering_is_deterministic(cat):
    assert _render(cat).files == _render(cat).files


def test_shell_parts_are_valid_bash(cat, tmp_path):
    for name, text in _render(cat).files.items():
        if name.endswith(".sh"):
            script = tmp_path / "part.sh"
            script.write_text(text)
            result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            assert result.returncode == 0, (name, result.stderr)


def test_dockerfile_string():
    assert dockerfile_string("plain") == '"plain"'
    assert dockerfile_string('a"b$c\\d') == '"a\\"b\\$c\\\\d"'
    with pytest.raises(QuotingError):  # no Dockerfile escape gives a newline back
        dockerfile_string("a\nb")


def test_offline_base_tag_is_derived_from_the_recipe(cat):
    off = cat.get("21.08").offline
    a = BaseRecipe(off)
    assert a.tag == BaseRecipe(off).tag  # asking again names the same image
    assert a.tag.startswith("local/cuda-base:bullseye-cuda11.2-py3.9-")
    assert BaseRecipe(cat.get("26.11").offline).tag != a.tag
    assert "NVCC_CCBIN=g++-13" in BaseRecipe(cat.get("26.11").offline).dockerfile()
    assert "NVCC_CCBIN" not in a.dockerfile()


def test_a_trixie_base_compiles_with_g_13_and_keeps_cuda_12_4s_driver_dependency_out():
    """Debian 13's toolkit is CUDA 12.4: GCC 13 at most, and nvidia-cuda-dev names the
    driver library libcuda-12.4-1 too (docs/explanation/release-26.11.md); the older bases' recipes,
    and so their tags, are unchanged by it."""
    from builder.catalog import OfflineBase

    text = BaseRecipe(OfflineBase("trixie", "12.4", "3.13")).dockerfile()
    assert "NVCC_CCBIN=g++-13" in text and " g++ g++-13 " in text and " python3.13 " in text
    assert 'libnvidia-ptxjitcompiler.so.1 (= 9999), libcuda-12.4-1"' in text
    bullseye = BaseRecipe(OfflineBase("bullseye", "11.2", "3.9")).dockerfile()
    assert "libcuda-12.4-1" not in bullseye and 'ptxjitcompiler.so.1 (= 9999)"' in bullseye


def test_offline_bases_never_install_driver_libraries(cat):
    text = BaseRecipe(cat.get("21.08").offline).dockerfile()
    assert '"Package: host-provided-nvidia-driver"' in text
    assert "Provides: libcuda.so.1 (= 9999), libnvidia-ml.so.1 (= 9999)" in text
    assert text.index("dpkg -i /tmp/host-driver.deb") < text.index("nvidia-cuda-toolkit")
    assert "-name 'libcuda.so*' -o -name 'libnvidia-ml.so*'" in text  # the build fails if one slipped in


def test_corporate_settings_never_appear_in_what_is_rendered(cat):
    """Mirrors, indexes and CAs reach builds through the settings server, never the Dockerfile."""
    text = _render(cat).dockerfile + BaseRecipe(cat.get("21.08").offline).dockerfile()
    assert 'ARG BUILD_SETTINGS=""' in text and "with-build-settings apt-get update" in text
    assert "PIP_INDEX_URL" not in text and "CaInfo" not in text


def test_a_capability_the_toolkit_cannot_compile_is_refused_or_left_to_ptx_jit_on_request(cat):
    rel = cat.get("21.08")  # CUDA 11: no newer ptxas of its major in the image
    newest = cuda_arch.supported_archs(rel.offline.cuda)[-1]
    with pytest.raises(UserError) as err:
        _render(cat, "21.08", cuda_cc="8.0,12.0", base="offline")
    assert "compute capability 12.0 cannot be compiled" in str(err.value)
    assert f"--allow-ptx-jit runs it by PTX JIT of compute_{newest.digits}" in str(err.value)
    out = _render(cat, "21.08", cuda_cc="8.0,12.0", base="offline", allow_ptx_jit=True)
    # SASS for what the toolkit compiles, its newest included (for the PTX the GPU JITs)
    assert out.meta["cuda_compute_capabilities"] == ["8.0", str(newest)]
    assert out.meta["ptx_jit"] == ["12.0"]
    assert f'ENV TF_CUDA_COMPUTE_CAPABILITIES="8.0,{newest}"' in out.dockerfile
    assert _render(cat, "21.08", base="offline").meta["ptx_jit"] == []


def test_blackwell_is_native_where_the_release_has_a_newer_ptxas(cat):
    """26.11: nvcc 12.4 stops at 9.0; the cuda_nvcc wheel's ptxas 12.9 assembles 10.0 and
    12.0, so they are compiled (SASS) without the opt-in, and nothing is left to JIT."""
    out = _render(cat, "26.11", cuda_cc="8.0,12.0", base="offline")
    assert out.meta["cuda_compute_capabilities"] == ["8.0", "12.0"] and out.meta["ptx_jit"] == []
    assert 'ENV TF_CUDA_COMPUTE_CAPABILITIES="8.0,12.0"' in out.dockerfile
    jit = _render(cat, "26.11", cuda_cc="8.0,12.0", base="offline", allow_ptx_jit=True)
    assert jit.meta["ptx_jit"] == [] and jit.meta["cuda_compute_capabilities"] == ["8.0", "12.0"]


def test_the_opt_in_and_the_refusal_on_the_command_line():
    refused = subprocess.run(
        [sys.executable, "-m", "builder.cli", "build", "--release", "21.08", "--cuda-cc", "12.0", "--dry-run"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--allow-ptx-jit" in refused.stderr and "or newer compiles 12.0" in refused.stderr
    for cmd in ("build", "render", "bake"):
        out = subprocess.run(
            [sys.executable, "-m", "builder.cli", cmd, "--help"],
            capture_output=True,
            text=True,
            env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
        )
        assert "--allow-ptx-jit" in out.stdout, cmd


def test_without_leaves_components_out_of_the_lock_and_the_dockerfile(cat):
    full = _render(cat, "26.11")
    assert "./nvbuild.sh --only dali" in full.dockerfile and "COPY components/jupyter/" in full.dockerfile
    r = _render(cat, "26.11", without=("dali", "jupyter"))
    assert "dali" not in r.dockerfile.replace('dev.tfbuilder.without="dali,jupyter"', "")
    assert "jupyter" not in r.dockerfile.replace('dev.tfbuilder.without="dali,jupyter"', "")
    assert 'dev.tfbuilder.without="dali,jupyter"' in r.dockerfile
    for name, text in r.files.items():
        if name.startswith("locks/requirements-"):
            assert "\njupyterlab==" not in text and "\nnvidia-dali-cuda120==" not in text and "\ntensorflow==" in text
    assert "locks/dali-tf-plugin.txt" not in r.files and "jupyter/jupyter_server_config.py" not in r.files


def test_a_runtime_image_gets_what_its_components_need_at_run_time(cat):
    """Horovod's mpi_lib links Open MPI and horovodrun starts mpirun: 26.11's core stage,
    which the runtime image is, installs openmpi-bin; without Horovod it does not."""
    core = _render(cat, "26.11").dockerfile.split("\nFROM core AS devel")[0]
    assert re.search(r"python3-pip openmpi-bin \\\n", core), core[-3000:]
    lean = _render(cat, "26.11", without=("horovod",)).dockerfile
    assert "openmpi" not in lean.replace('dev.tfbuilder.without="horovod"', "")


def test_without_jupyter_on_21_08_takes_its_pins_and_what_only_it_needed(cat):
    """21.08's JupyterLab 3.0.16 comes with a pin (jsonschema<4.18): left out, the lock
    loses JupyterLab, jsonschema and jupyter-server, and keeps what TensorFlow needs."""
    full = _render(cat, "21.08").files["locks/requirements-py3.9.txt"]
    assert all(f"\n{d}==" in full for d in ("jupyterlab", "jsonschema", "jupyter-server", "tensorflow", "six"))
    lean = _render(cat, "21.08", without=("jupyter",)).files["locks/requirements-py3.9.txt"]
    assert not any(f"\n{d}==" in lean for d in ("jupyterlab", "jsonschema", "jupyter-server"))
    assert all(f"\n{d}==" in lean for d in ("tensorflow", "six", "tensorboard", "typing-extensions"))


@pytest.mark.parametrize(
    "without, says",
    [
        (("tensorboard",), "--without tensorboard: tensorflow requires tensorboard, which cannot be left out"),
        (
            ("nsight", "horovod", "dali", "bogus"),
            "--without 'bogus': release 21.08 does not install it (it has: dali, horovod, jupyter, nsight, tensorboard)",
        ),
    ],
)
def test_without_refuses_what_the_release_cannot_leave_out(cat, without, says):
    with pytest.raises(UserError) as err:
        _render(cat, "21.08", without=without)
    assert str(err.value).startswith(says), str(err.value)


def test_without_horovod_drops_what_only_it_needed_and_keeps_what_others_need(cat):
    """Horovod's install_requires only serve it: left out with it, except where something
    kept requires one (cryptography needs cffi, JupyterLab's ipykernel psutil); its
    toolchain goes too."""
    r = _render(cat, without=("horovod",))
    lock = r.files["locks/requirements-py3.9.txt"]
    assert not any(f"\n{n}==" in lock for n in ("cloudpickle", "pyyaml"))
    assert "\ncffi==" in lock and "\npsutil==" in lock and "\ntensorflow==2.5.0" in lock
    both = _render(cat, without=("horovod", "jupyter")).files["locks/requirements-py3.9.txt"]
    assert "\npsutil==" not in both
    assert "./nvbuild.sh --only horovod" not in r.dockerfile and "openmpi" not in r.dockerfile
    full = _render(cat)
    assert "\ncloudpickle==" in full.files["locks/requirements-py3.9.txt"] and "libopenmpi-dev" in full.dockerfile
