"""What `builder releases`, `builder show` and `builder inspect` print (builder/image/describe.py,
builder/catalog/driver.py bases()): both bases of a release, truthfully, and a readable inspect
summary with no Python reprs and no blank fields."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from builder import catalog
from builder.catalog import driver
from builder.image import describe


@pytest.fixture(scope="module")
def real():
    return catalog.load()


def test_both_bases_of_21_08_are_what_the_catalog_and_its_images_hold(real):
    bases = driver.bases(real.get("21.08"))
    assert bases["offline"]["os"] == "Debian 11 (bullseye)"
    assert (bases["offline"]["python"], bases["offline"]["cuda_toolkit"]) == ("3.9", "11.2")
    # the upstream image is Ubuntu 20.04 with CUDA 11.4.1 and Python 3.8: not what the offline image holds
    assert (bases["upstream"]["os"], bases["upstream"]["python"], bases["upstream"]["cuda_toolkit"]) == (
        "Ubuntu 20.04",
        "3.8",
        "11.4.1",
    )
    assert bases["upstream"]["image"] == "nvcr.io/nvidia/cuda:11.4.1-cudnn8-devel-ubuntu20.04"
    # cuDNN and NCCL come from NVIDIA's wheels on either base
    assert "cuDNN 8.5.0.96" in bases["offline"]["cuda_libraries"] and "11.2" in bases["offline"]["cuda_libraries"]
    assert "--base auto" in bases["offline"]["chosen_by"] and "--base auto" not in bases["upstream"]["chosen_by"]


def test_26_11_upstream_base_is_ubuntu_22_04_and_its_libraries_are_cuda_12_9_wheels(real):
    bases = driver.bases(real.get("26.11"))
    assert bases["upstream"]["os"] == "Ubuntu 22.04"  # the catalog said Debian 13 for the upstream image once
    assert bases["offline"]["os"] == "Debian 13 (trixie)" and bases["offline"]["python"] == "3.13"
    assert bases["offline"]["cuda_libraries"] == bases["upstream"]["cuda_libraries"] == "12.9 (NVIDIA's wheels)"


def test_every_release_upstream_os_is_the_one_its_image_tag_names(real):
    for r in real.releases.values():
        m = re.search(r"-(ubuntu|rockylinux|ubi)(\d+(?:\.\d+)?)$", r.upstream_image)
        if m:
            assert (r.os_distro, r.os_version) == (m.group(1), m.group(2)), r.name


def test_releases_table_shows_both_bases():
    out = subprocess.run([sys.executable, "-m", "builder.cli", "releases"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    line = next(li for li in out.stdout.splitlines() if li.startswith("21.08 "))
    assert "Debian 11 (bullseye), Python 3.9, CUDA 11.2" in line
    assert "Ubuntu 20.04, Python 3.8, CUDA 11.4.1" in line
    assert "26.11: 12.9 (NVIDIA's wheels)" in out.stdout


def test_releases_json_has_both_bases_per_release(real):
    rows = describe.releases_rows(real)
    assert [r["release"] for r in rows] == list(real.releases)
    row = next(r for r in rows if r["release"] == "26.11")
    assert set(row["bases"]) == {"offline", "upstream"}
    assert row["variants"] == {"tf2-py3": "TensorFlow 2.21.0"}
    json.dumps(rows)  # all plain data


def test_show_prints_the_bases_in_its_computed_block():
    out = subprocess.run(
        [sys.executable, "-m", "builder.cli", "show", "21.08"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    shown = yaml.safe_load(out.stdout)["computed"]["bases"]
    assert shown["offline"]["os"] == "Debian 11 (bullseye)" and shown["upstream"]["os"] == "Ubuntu 20.04"


REPORT = {
    "image": "reg/tf:1",
    "id": "sha256:" + "ab" * 32,
    "size_bytes": 3 * 1024**3,
    "release": "21.08",
    "variant": "tf2-py3",
    "vendor": "ACME ML <ml@acme.example>",
    "created": "2026-11-27T00:00:00Z",
    "build_id": "b1",
    "build_ref": "abc123",
    "parent": "",
    "base_kind": "offline",
    "base_image": "local/cuda-base:x",
    "platform": "linux/amd64",
    "framework": "TensorFlow 2.5.0",
    "python": "3.9.2",
    "toggles": {"xla": True, "gcp": False, "hdfs": False},
    "tf_trt": "unavailable",
    "without": [],
    "env_overrides": [],
    "patches": [{"name": "0001-fix.patch", "sha256": "00"}],
    "filesystems": {"gs": True, "hdfs": False},
    "driver_libraries": [],
    "versions": {"cuda": "11.2", "cudnn": "8.5.0", "tensorrt": "", "horovod": "0.22.1"},
    "tools": {"tensorboard": "2.11.2"},
    "libraries": {
        "cudnn": {"soname": "libcudnn.so.8", "loaded": True, "version": "8.5.0", "path": "/x/libcudnn.so.8"},
        "tensorrt": {"soname": "libnvinfer.so.7", "loaded": False, "error": "cannot open"},
    },
    "coverage": {"8.6": "sass", "9.0": "none (nccl)"},
}


def test_inspect_summary_is_a_readable_table_without_reprs_or_blanks():
    text = describe.summary_text(dict(REPORT))
    assert "{" not in text and "[" not in text and "True" not in text  # no Python reprs
    assert not any(re.fullmatch(r"[\w ]+:\s*", li) for li in text.splitlines())  # no empty field
    assert "Derived from" not in text and "tensorrt " not in text.split("LIBRARY")[0]  # empty: left out
    assert re.search(r"^Image:\s+reg/tf:1 \(abababababab, 3\.0 GiB\)$", text, re.M)
    assert re.search(r"^Made by:\s+ACME ML <ml@acme.example>$", text, re.M)
    assert re.search(r"^Framework:\s+TensorFlow 2\.5\.0 \(Python 3\.9\.2\); XLA on, GCP off, HDFS off$", text, re.M)
    assert re.search(r"^Patches:\s+0001-fix\.patch$", text, re.M)
    assert re.search(r"^tensorrt\s+libnvinfer\.so\.7\s+NO\s+cannot open$", text, re.M)
    assert re.search(r"^9\.0\s+none \(nccl\)$", text, re.M)


def test_what_the_image_says_reaches_the_terminal_escaped():
    """Labels and the report are the image's words: an ESC or a newline in them is shown
    escaped, never obeyed, and a field stays on its line."""
    report = {**REPORT, "vendor": "Evil\x1b]0;pwned\x07 Corp\nInjected: line", "build_ref": "x\u2028y"}
    text = describe.summary_text(report)
    assert all(c.isprintable() for line in text.splitlines() for c in line)
    assert re.search(r"^Made by:\s+Evil\\x1b\]0;pwned\\x07 Corp\\nInjected: line$", text, re.M)
