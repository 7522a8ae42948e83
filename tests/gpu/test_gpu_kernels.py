"""tests/gpu/run_gpu_check.sh as tests (README.md in this directory says what it checks).

test_kernels_match_cpu needs a GPU and nvcc, and is skipped with the script's reason without
them; test_harness_compiles needs only nvcc: it builds the three binaries (sm_90 SASS;
compute_90 PTX; sm_90 assembled by ptxas from compute_75 PTX and injected into nvcc's fatbin
through a fatbinary options file, beside sm_75 SASS) and runs the harness's CPU self-check.
scripts/test.sh runs this directory with the unit tests, so CI's log shows the skip and its
reason.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("run_gpu_check.sh")
SKIPPED = 77  # the script's exit status when it skips; its "SKIP: ..." line says why
TIMEOUT_S = 300  # the check takes about a minute; the compile-only run half that


def run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=TIMEOUT_S)


def passed_or_skip(proc: subprocess.CompletedProcess[str]) -> None:
    """Skips with the script's reason when it skipped, else asserts that it passed."""
    if proc.returncode == SKIPPED:
        lines = proc.stdout.strip().splitlines() or ["run_gpu_check.sh skipped"]
        pytest.skip(next((line for line in lines if line.startswith("SKIP:")), lines[-1]))
    assert proc.returncode == 0, f"run_gpu_check.sh exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.gpu
def test_kernels_match_cpu() -> None:
    proc = run_check()
    passed_or_skip(proc)
    print(proc.stdout)  # the table (shown with -rP or -s)


def test_harness_compiles() -> None:
    proc = run_check("--compile-only", "--arch", "90")
    passed_or_skip(proc)
    assert "compile-only: OK" in proc.stdout
    # The assembled mode was built (ptxas and the options file worked), and its cubins define
    # the kernels nvcc's own code does (python3 reads them: it runs this test). A machine
    # without a ptxas beside its nvcc skips that mode, saying why.
    if "assembled mode skipped: no ptxas" in proc.stdout:
        pytest.skip(next(line for line in proc.stdout.splitlines() if line.startswith("assembled mode skipped")))
    assert re.search(
        r"^  kernel_check_assembled +SASS sm_90 via ptxas\+fatbinary options file "
        r"\(from compute_\d+ PTX",
        proc.stdout,
        re.M,
    ), proc.stdout
    assert re.search(
        r"^kernels: the injected sm_90 cubins define the \d+ that nvcc's sm_\d+ code", proc.stdout, re.M
    ), proc.stdout
