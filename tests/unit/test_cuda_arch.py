"""The compute-capability policy (builder/in_image/cuda_arch.py)."""

import subprocess
import sys

import pytest

from builder.in_image import cuda_arch
from builder.in_image.cuda_arch import ArchError

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


@pytest.mark.parametrize(
    "cuda,low,high,absent",
    [
        ("11.2", "3.5", "8.6", ["8.7", "8.9", "3.0"]),
        ("11.4.1", "3.5", "8.7", ["8.9", "9.0"]),
        ("11.8", "3.5", "9.0", ["10.0"]),
        ("12.1.0", "5.0", "9.0", ["3.5", "3.7"]),
        ("12.8", "5.0", "12.0", ["12.1"]),
        ("13.0", "7.5", "12.1", ["7.0", "10.1"]),
    ],
)
def test_supported_ranges_per_toolkit(cuda, low, high, absent):
    archs = [str(a) for a in cuda_arch.supported_archs(cuda)]
    assert archs[0] == low and archs[-1] == high
    assert not set(absent) & set(archs)


def test_check_names_the_supported_range():
    problems = cuda_arch.check(["8.6", "9.9"], "11.4.1")
    assert problems == [
        "compute capability 9.9 is not a GPU architecture for CUDA 11.4.1; "
        "supported: 3.5-8.7 (3.5, 3.7, 5.0, 5.2, 5.3, 6.0, 6.1, 6.2, 7.0, 7.2, 7.5, 8.0, 8.6, 8.7)"
    ]
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
    run = lambda *a: subprocess.run([sys.executable, str(script), *a], capture_output=True, text=True, cwd=tmp_path)  # noqa: E731
    ok = run("resolve", "all", "11.2", "5.2,8.6")
    assert ok.returncode == 0 and ok.stdout.strip() == "5.2,8.6"
    bad = run("resolve", "9.9", "11.2")
    assert bad.returncode == 2 and "9.9 is not a GPU architecture for CUDA 11.2" in bad.stderr
    gen = run("gencode", "7.0,8.0")
    assert gen.stdout.split() == [
        "-gencode=arch=compute_70,code=sm_70",
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_80,code=compute_80",
    ]


# --- Hopper and Blackwell on an older toolkit: refused, or PTX JIT by choice ------------


def test_a_capability_newer_than_the_toolkit_is_refused_naming_the_toolkit_and_the_opt_in():
    [line] = cuda_arch.check(["8.0", "12.0"], "12.4")
    assert line == (
        "compute capability 12.0 cannot be compiled for CUDA 12.4; supported: 5.0-9.0 "
        "(5.0, 5.2, 5.3, 6.0, 6.1, 6.2, 7.0, 7.2, 7.5, 8.0, 8.6, 8.7, 8.9, 9.0); CUDA 12.8 or newer "
        "compiles 12.0, or --allow-ptx-jit runs it by PTX JIT of compute_90"
    )
    [line] = cuda_arch.check(["10.0"], "12.4")
    assert "CUDA 12.8 or newer compiles 10.0" in line


@pytest.mark.parametrize(
    "cuda, arch, first",
    [("12.4", "10.0", "12.8"), ("12.4", "12.1", "12.9"), ("11.2", "9.0", "11.8"), ("11.2", "8.9", "11.8")],
)
def test_the_first_toolkit_that_compiles_an_arch_is_named(cuda, arch, first):
    assert cuda_arch.first_toolkit_for(cuda_arch._parse_one(arch)) == first
    assert f"CUDA {first} or newer compiles {arch}" in cuda_arch.check([arch], cuda)[0]


def test_with_the_opt_in_newer_gpus_run_the_newest_ptx_which_is_then_compiled():
    assert cuda_arch.check(["8.0", "10.0", "12.0"], "12.4", allow_ptx_jit=True) == []
    assert cuda_arch.resolve("8.0,12.0", "12.4", None, allow_ptx_jit=True) == ["8.0", "9.0"]
    assert cuda_arch.resolve("12.0", "12.4", None, allow_ptx_jit=True) == ["9.0"]
    assert cuda_arch.resolve("8.0,9.0", "12.4", None, allow_ptx_jit=True) == ["8.0", "9.0"]  # nothing to JIT
    assert cuda_arch.jit_only(["8.0", "10.0", "12.0"], "12.4") == ["10.0", "12.0"]
    flags = cuda_arch.gencode_flags(cuda_arch.resolve("8.0,12.0", "12.4", None, allow_ptx_jit=True))
    assert flags[-1] == "-gencode=arch=compute_90,code=compute_90"
    # the PTX runs forward only: an arch older than the toolkit's oldest stays refused
    assert "cannot be compiled" in cuda_arch.check(["3.5"], "12.4", allow_ptx_jit=True)[0]
    assert "--allow-ptx-jit" not in cuda_arch.check(["3.5"], "12.4")[0]


def test_the_in_image_policy_takes_the_opt_in_as_a_flag(capsys):
    assert cuda_arch.main(["resolve", "8.0,12.0", "12.4", "", "--allow-ptx-jit"]) == 0
    assert capsys.readouterr().out.strip() == "8.0,9.0"
    assert cuda_arch.main(["resolve", "8.0,12.0", "12.4"]) == 2
    assert "--allow-ptx-jit runs it" in capsys.readouterr().err


def test_every_coverage_report_answers_for_the_fleet():
    assert cuda_arch.FLEET == ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0")
    # a 21.08 image: SASS up to sm_86, PTX compute_86: Blackwell runs it by JIT
    assert cuda_arch.coverage("12.0", ["70", "86"], ["86"]) == ("ptx", "compute_86")
    assert cuda_arch.coverage("10.0", ["90"], ["90"]) == ("ptx", "compute_90")


def test_a_newer_ptxas_of_the_same_major_assembles_what_nvcc_does_not_know():
    # 26.11: Debian's nvcc 12.4 stops at 9.0; the nvidia-cuda-nvcc-cu12 12.9 wheel's ptxas
    # assembles 10.0 and 12.0 from compute_90, so they are SASS without --allow-ptx-jit.
    assert cuda_arch.check(["9.0", "10.0", "12.0"], "12.4", ptxas="12.9") == []
    assert cuda_arch.resolve("9.0,10.0,12.0", "12.4", None, ptxas="12.9") == ["9.0", "10.0", "12.0"]
    assert cuda_arch.assembled(["8.6", "9.0", "10.0", "12.0"], "12.4", "12.9") == ["10.0", "12.0"]
    assert cuda_arch.gencode_flags(["9.0", "10.0", "12.0"], "12.4") == [
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    ]
    assert cuda_arch.jit_only(["9.0", "10.0", "12.0"], "12.4", "12.9") == []
    # what neither knows still needs the opt-in: ptxas 12.8 stops at 12.0
    assert "12.1 cannot be compiled" in cuda_arch.check(["9.0", "12.1"], "12.4", ptxas="12.8")[0]
    assert cuda_arch.compiled(["8.0", "12.0", "12.1"], "12.4", "12.8") == ["8.0", "9.0", "12.0"]
    # another major is no assembler (CUDA 13 PTX/code on a CUDA 12 runtime), nor an older ptxas
    assert cuda_arch.assembled(["12.0"], "12.4", "13.0") == []
    assert cuda_arch.assembled(["12.0"], "12.4", "12.4") == []
    assert cuda_arch.check(["12.0"], "12.4", ptxas="13.0") != []


def test_gencode_for_a_toolkit_leaves_out_the_assembled():
    assert cuda_arch.gencode_flags(["8.6", "12.0"], "12.4")[-1] == "-gencode=arch=compute_86,code=compute_86"
    # only assembled capabilities: nvcc writes the PTX they come from, its newest, and no SASS
    assert cuda_arch.gencode_flags(["12.0"], "12.4") == ["-gencode=arch=compute_90,code=compute_90"]


def test_the_in_image_policy_takes_the_ptxas_version(capsys):
    assert cuda_arch.main(["resolve", "9.0,12.0", "12.4", "", "--ptxas", "12.9"]) == 0
    assert capsys.readouterr().out.strip() == "9.0,12.0"
    assert cuda_arch.main(["assemble", "9.0,10.0,12.0", "12.4", "--ptxas", "12.9"]) == 0
    assert capsys.readouterr().out.strip() == "100 120"
    # nvbuild.sh passes an empty version when the image has no newer ptxas
    assert cuda_arch.main(["resolve", "9.0,12.0", "12.4", "", "--ptxas", ""]) == 2
    assert cuda_arch.main(["assemble", "9.0", "12.4", "--ptxas", ""]) == 0
    assert capsys.readouterr().out.strip() == ""
