"""The compute-capability policy (builder/cuda_arch.py)."""
import subprocess
import sys

import pytest

from builder import cuda_arch
from builder.cuda_arch import ArchError

RELEASE_LIST = ["5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6"]


@pytest.mark.parametrize("spec", ["6.0,6.1,7.0", "60,61,70", "sm_60, sm_61 ,sm_70", "7.0;6.1;6.0;6.0"])
def test_parse_accepts_every_spelling_and_sorts_unique(spec):
    assert cuda_arch.parse(spec) == ["6.0", "6.1", "7.0"]


def test_parse_three_digit_archs():
    assert cuda_arch.parse("100,90") == ["9.0", "10.0"]


def test_all_is_the_release_default_and_local_is_deferred():
    assert cuda_arch.parse("all", RELEASE_LIST) == RELEASE_LIST
    assert cuda_arch.parse("ALL", RELEASE_LIST) == RELEASE_LIST
    assert cuda_arch.parse("local", RELEASE_LIST) == "local"


@pytest.mark.parametrize("spec", ["", "abc", "8.6.1", "8", "local,8.0", "1234"])
def test_parse_rejects_garbage_with_one_line(spec):
    with pytest.raises(ArchError) as exc:
        cuda_arch.parse(spec)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("cuda,low,high,absent", [
    ("11.2", "3.5", "8.6", ["8.7", "8.9", "3.0"]),
    ("11.4.1", "3.5", "8.7", ["8.9", "9.0"]),
    ("11.8", "3.5", "9.0", ["10.0"]),
    ("12.1.0", "5.0", "9.0", ["3.5", "3.7"]),
    ("12.8", "5.0", "12.0", ["12.1"]),
    ("13.0", "7.5", "12.1", ["7.0", "10.1"]),
])
def test_supported_ranges_per_toolkit(cuda, low, high, absent):
    archs = [str(a) for a in cuda_arch.supported_archs(cuda)]
    assert archs[0] == low and archs[-1] == high
    assert not set(absent) & set(archs)


def test_check_names_the_supported_range():
    problems = cuda_arch.check(["8.6", "9.9"], "11.4.1")
    assert problems == ["compute capability 9.9 is not a GPU architecture for CUDA 11.4.1; "
                        "supported: 3.5-8.7 (3.5, 3.7, 5.0, 5.2, 5.3, 6.0, 6.1, 6.2, 7.0, 7.2, 7.5, 8.0, 8.6, 8.7)"]
    assert "cannot be compiled" in cuda_arch.check(["9.0"], "11.2")[0]
    assert cuda_arch.check("local", "11.2") == []


def test_gencode_is_sass_for_each_and_ptx_for_the_newest_only():
    assert cuda_arch.gencode_flags(["8.6", "5.2", "7.0"]) == [
        "-gencode=arch=compute_52,code=sm_52",
        "-gencode=arch=compute_70,code=sm_70",
        "-gencode=arch=compute_86,code=sm_86",
        "-gencode=arch=compute_86,code=compute_86",
    ]


def test_module_runs_standalone_as_in_the_image(tmp_path):
    """nvbuild.sh runs this file with the image's python and no builder package."""
    script = tmp_path / "cuda_arch.py"
    script.write_text(open(cuda_arch.__file__).read())
    run = lambda *a: subprocess.run([sys.executable, str(script), *a], capture_output=True, text=True, cwd=tmp_path)
    ok = run("resolve", "all", "11.2", "5.2,8.6")
    assert ok.returncode == 0 and ok.stdout.strip() == "5.2,8.6"
    bad = run("resolve", "9.9", "11.2")
    assert bad.returncode == 2 and "9.9 is not a GPU architecture for CUDA 11.2" in bad.stderr
    gen = run("gencode", "7.0,8.0")
    assert gen.stdout.split() == ["-gencode=arch=compute_70,code=sm_70", "-gencode=arch=compute_80,code=sm_80",
                                  "-gencode=arch=compute_80,code=compute_80"]
