"""The `builder` command line, run as users run it: the installed console script."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from builder import catalog


def builder(*args, **kw):
    return subprocess.run(["builder", *args], capture_output=True, text=True, timeout=60, **kw)


def assert_one_line_error(result, text):
    assert result.returncode == 2, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_render_writes_a_context_matching_the_release(tmp_path):
    out = tmp_path / "out"
    result = builder("render", "--release", "21.08", "--variant", "tf2-py3", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out / "Dockerfile")
    text = (out / "Dockerfile").read_text()
    rel = catalog.load().get("21.08")
    assert f'TF_CUDA_COMPUTE_CAPABILITIES="{",".join(rel.cuda_cc)}"' in text
    assert 'TF_ENABLE_XLA="1"' in text and 'TF_NEED_GCP="0"' in text and 'TF_NEED_HDFS="0"' in text
    for name, value in rel.env.items():
        assert f'{name}="{value}"' in text
    for part in (
        "nvbuild.sh",
        "nvbuildopts",
        "cuda_arch.py",
        "tensorflow-source",
        "entrypoint/nvidia_entrypoint.sh",
        "entrypoint/entrypoint.d/10-banner.sh",
        "docker-examples/Dockerfile.customtensorflow",
        "docker-examples/Dockerfile.addpackages",
        "nvidia-examples/README.md",
    ):
        assert (out / part).exists(), part
    for lock in (
        "locks/requirements-py3.8.txt",
        "locks/requirements-py3.9.txt",
        "locks/horovod.txt",
        "image_report.py",
        "fatbin.py",
        "register-gpu-wheels",
    ):
        assert (out / lock).is_file(), lock
    # Rendering again over our own output is fine: the files the marker lists are replaced.
    again = builder("render", "--release", "21.08", "--variant", "tf2-py3", "--cuda-cc", "8.6", "-o", str(out))
    assert again.returncode == 0
    assert 'TF_CUDA_COMPUTE_CAPABILITIES="8.6"' in (out / "Dockerfile").read_text()


def test_render_without_variant_writes_every_buildable_variant(tmp_path):
    result = builder("render", "--release", "21.08", "-o", str(tmp_path / "o"))
    assert result.returncode == 0, result.stderr
    assert "skipped tf1-py3: release 21.08 variant tf1-py3: TensorFlow 1.15.5 has no wheel for Python" in result.stderr
    assert (tmp_path / "o" / "Dockerfile").is_file()  # one variant left: written where asked


def test_render_to_stdout():
    result = builder("render", "-r", "21.08", "-v", "tf2-py3", "--cuda-cc", "70,80", "--no-xla")
    assert (
        result.returncode == 0
        and "RUN --mount=type=cache,id=tfbuilder-nvbuild-ccache,target=/var/cache/nvbuild ./nvbuild.sh --sm 7.0,8.0"
        in result.stdout
    )
    assert 'TF_ENABLE_XLA="0"' in result.stdout


@pytest.mark.parametrize(
    "args,text",
    [
        (
            [
                "render",
                "--release",
                "21.08",
                "--variant",
                "tf2-py3",
                "--cuda-cc",
                "9.9",
            ],  # the default: the offline base
            "compute capability 9.9 is not a GPU architecture for CUDA 11.2; supported: 3.5-8.6",
        ),
        (
            ["render", "--release", "21.08", "--variant", "tf2-py3", "--base", "upstream", "--cuda-cc", "9.9"],
            "compute capability 9.9 is not a GPU architecture for CUDA 11.4.1; supported: 3.5-8.7",
        ),
        (["render", "--release", "99.99"], "unknown release '99.99' (known: 21.06, 21.08"),
        (["render", "--release", "21.08", "--variant", "tf9-py3"], "release 21.08 has no variant 'tf9-py3'"),
        (
            ["render", "--release", "21.08", "--variant", "tf2-py3", "--env", "BAD NAME=1"],
            "not a valid environment variable name",
        ),
        (
            ["render", "--release", "21.08", "--variant", "tf2-py3", "--base", "bad base"],
            "is not auto, upstream, offline",
        ),
        (["render", "--release", "21.08", "--variant", "tf1-py3"], "TensorFlow 1.15.5 has no wheel for Python"),
        (["render", "--release", "21.08", "--variant", "tf2-py3", "--hdfs"], "needs libhdfs.so from a Hadoop client"),
        (["render", "--all", "--release", "21.08"], "--all renders the catalog as it is"),
        (["render", "--check"], "--check goes with --all"),
        (["render"], "give --release R"),
        (["render", "--no-such-flag"], "No such option: --no-such-flag"),
        (["show", "99.99"], "unknown release '99.99'"),
        (["frobnicate"], "No such command 'frobnicate'"),
        # the old `--push REGISTRY` (a switch now, as in buildx) is answered with the new form
        (
            ["build", "-r", "21.08", "--push", "reg.example:5000/ml", "--dry-run"],
            "--push is a switch: tag the image -t reg.example:5000/ml/NAME:TAG and give --push, or give --push "
            "--registry reg.example:5000/ml",
        ),
    ],
)
def test_user_errors_are_one_line_and_exit_2(args, text):
    assert_one_line_error(builder(*args), text)


def test_render_never_overwrites_a_foreign_directory(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    result = builder("render", "-r", "21.08", "-v", "tf2-py3", "-o", str(tmp_path))
    assert_one_line_error(result, "is not empty and was not written by `builder render`")
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_releases_table_and_json():
    """describe.releases_rows: each release's variants and both bases (the default one first)."""
    table = builder("releases")
    assert table.returncode == 0 and re.search(
        r"^21\.08\s+tf1-py3 .*Debian 11 \(bullseye\).*Ubuntu 20\.04", table.stdout, re.M
    ), table.stdout
    rows = json.loads(builder("releases", "--json").stdout)
    assert [r["release"] for r in rows] == ["21.06", "21.08", "21.10", "22.12", "23.03", "26.11"]
    assert rows[1]["variants"] == {"tf1-py3": "TensorFlow 1.15.5", "tf2-py3": "TensorFlow 2.5.0"}
    assert rows[1]["bases"]["offline"]["python"] == "3.9" and rows[1]["bases"]["upstream"]["cuda_toolkit"] == "11.4.1"


def test_show_prints_the_resolved_release():
    spec = yaml.safe_load(builder("show", "21.08").stdout)
    assert spec["cuda"] == "11.4.1" and spec["python"] == "3.8"  # own and inherited values
    assert spec["env"]["TF_AUTOTUNE_THRESHOLD"] == "2"  # from _common
    assert json.loads(builder("show", "21.08", "--json").stdout)["build"]["xla"] is True


def test_invalid_private_catalog_lists_every_problem(tmp_path):
    (tmp_path / "a.yaml").write_text('release: "1.0"\nparent: nope\n')
    (tmp_path / "b.yaml").write_text("release: [\n")
    result = builder("releases", env={"BUILDER_CATALOG": str(tmp_path), "PATH": __import__("os").environ["PATH"]})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "a.yaml: parent: unknown parent 'nope'" in result.stderr
    assert re.search(r"b\.yaml: line \d+: malformed YAML", result.stderr)


def test_help_works():
    assert builder("--help").returncode == 0


def test_a_missing_lock_file_is_one_line_naming_the_command(tmp_path):
    """A private catalog whose locks were never written: render says how to write them."""
    shutil.copytree(Path(catalog.RELEASES_DIR), tmp_path / "cat")
    result = builder(
        "render",
        "--release",
        "21.08",
        "--variant",
        "tf2-py3",
        "-o",
        str(tmp_path / "out"),
        env={**os.environ, "BUILDER_CATALOG": str(tmp_path / "cat")},
    )
    assert_one_line_error(result, "run `builder lock`")
    assert not (tmp_path / "out").exists()
