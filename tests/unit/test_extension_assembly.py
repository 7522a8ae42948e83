"""framework-src/Makefile's CUDA rule where ./configure found a newer ptxas (ASSEMBLE):
nvcc writes the newest PTX, ptxas assembles one cubin per listed capability, and the
object's nvcc compile takes them through a fatbinary options file whose name carries the
list and ptxas's full version (a compiler cache hashes the command line, not the file).
Run with stand-ins for nvcc and ptxas that record their arguments; nothing is compiled."""

import json
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TOOL = r"""#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["CALLS"], "a") as f:
    f.write(json.dumps({"tool": os.path.basename(sys.argv[0]), "args": args}) + "\n")
out = args[args.index("-o") + 1]
open(out, "w").write("made by " + os.path.basename(sys.argv[0]))
"""


def config(tmp: Path, assemble: str, ptxas_id: str = "12.9.86") -> None:
    (tmp / "config.mk").write_text(
        "PYTHON := python3\nNEED_CUDA := 1\nCUDA_VERSION := 12.4\nCUDA_CC := 9.0,10.0,12.0\n"
        "GENCODE := -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90\n"
        f"ASSEMBLE := {assemble}\nPTX_ARCH := 90\nPTXAS := {tmp}/bin/ptxas\nPTXAS_VERSION := 12.9\n"
        f"PTXAS_ID := {ptxas_id}\nCUDA_INCLUDE := /usr/include\nCUDA_LIB := /usr/lib\nENABLE_XLA := 0\n"
        "OPT_FLAGS := -O2\nLD_FLAGS :=\nTF_VERSION := 2.21.0\nTF_CFLAGS := -I/x -std=c++17\nTF_LFLAGS :=\n"
    )


def make(tmp: Path) -> list[dict]:
    calls = tmp / "calls.jsonl"
    calls.unlink(missing_ok=True)
    out = subprocess.run(
        ["make", "-s", "build/obj/cuda/gelu.o", f"NVCC={tmp}/bin/nvcc"],
        cwd=tmp,
        capture_output=True,
        text=True,
        env={**os.environ, "CALLS": str(calls)},
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def test_capabilities_beyond_nvcc_are_assembled_into_nvccs_fatbin(tmp_path):
    shutil.copy(ROOT / "framework-src" / "Makefile", tmp_path)
    shutil.copytree(ROOT / "framework-src" / "csrc", tmp_path / "csrc")
    (tmp_path / "bin").mkdir()
    for tool in ("nvcc", "ptxas"):
        (tmp_path / "bin" / tool).write_text(TOOL)
        (tmp_path / "bin" / tool).chmod(0o755)
    config(tmp_path, "100 120")
    calls = make(tmp_path)
    assert [c["tool"] for c in calls] == ["nvcc", "ptxas", "ptxas", "nvcc"]
    ptx, *assembled, compile_ = calls
    obj = tmp_path / "build" / "obj" / "cuda"
    assert "-ptx" in ptx["args"] and "-arch=compute_90" in ptx["args"]
    assert not any(a.startswith("-gencode") for a in ptx["args"])  # the PTX only, no SASS
    assert [c["args"][:1] for c in assembled] == [["-arch=sm_100"], ["-arch=sm_120"]]
    assert all("build/obj/cuda/gelu.ptx" in c["args"] for c in assembled)  # from nvcc's PTX
    options = obj / "gelu.sm100.sm120.ptxas12.9.86.fatbin-options"
    at = compile_["args"].index("-Xfatbin")
    assert compile_["args"][at + 1] == f"--options-file={options}"
    assert options.read_text().splitlines() == [
        f"--image3=kind=elf,sm={sm},file={obj}/gelu.sm_{sm}.cubin" for sm in (100, 120)
    ]
    assert make(tmp_path) == []  # nothing changed: nothing runs
    config(tmp_path, "100")  # another list: rebuilt, another name
    calls = make(tmp_path)
    assert [c["tool"] for c in calls] == ["nvcc", "ptxas", "nvcc"]
    assert f"--options-file={obj}/gelu.sm100.ptxas12.9.86.fatbin-options" in calls[-1]["args"]


def test_without_a_newer_ptxas_nvcc_compiles_alone(tmp_path):
    shutil.copy(ROOT / "framework-src" / "Makefile", tmp_path)
    shutil.copytree(ROOT / "framework-src" / "csrc", tmp_path / "csrc")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").write_text(TOOL)
    (tmp_path / "bin" / "nvcc").chmod(0o755)
    config(tmp_path, "", "")
    calls = make(tmp_path)
    assert [c["tool"] for c in calls] == ["nvcc"] and "-Xfatbin" not in calls[0]["args"]
