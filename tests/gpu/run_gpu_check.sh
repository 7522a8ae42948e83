#!/usr/bin/env bash
# GPU check of tfext's CUDA kernels: framework-src/csrc/cuda/*.cu.cc compiled standalone (no
# TensorFlow) by this machine's nvcc for its GPU (sm_XY) in three modes, each run against the
# extension's CPU arithmetic (framework-src/csrc/cpu) by kernel_check.cc: SASS; PTX only (the
# driver JITs it); and "assembled": the only code fit for the GPU is an sm_XY cubin that
# ptxas assembled from an older arch's PTX and nvcc's fatbinary took in through
# -Xfatbin --options-file (framework-src/Makefile's ASSEMBLE rule). README.md has the details.
#
#   tests/gpu/run_gpu_check.sh                  build for the GPU and check (needs a GPU)
#   tests/gpu/run_gpu_check.sh --compile-only   build the three binaries for --arch (default
#                                               90) and run the harness's CPU self-check: no GPU
#   --arch XY    compile for sm_XY/compute_XY instead of the GPU's capability
#
# nvcc: $NVCC, else the one on PATH, else /usr/local/cuda/bin/nvcc; ptxas: $PTXAS, else the
# one beside nvcc. Eigen (for Eigen::half in csrc/cpu): $EIGEN_INCLUDE, else
# /usr/include/eigen3, else eigen_shim/ (CUDA's half).
# Exit: 0 all passed; 1 a failure; 2 usage; 77 skipped (no GPU or no nvcc; one line says why).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
csrc=$(cd "$here/../../framework-src/csrc" && pwd)
SKIP=77

skip() { echo "SKIP: $*"; exit "$SKIP"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

compile_only=0 arch=
while [ $# -gt 0 ]; do
  case $1 in
    --compile-only) compile_only=1 ;;
    --arch) arch=${2:-}; shift ;;
    -h|--help) sed -n '2,18s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--compile-only] [--arch XY]" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$arch" ] && ! [[ $arch =~ ^[0-9]+[a-z]?$ ]]; then echo "--arch: XY as in sm_XY, got '$arch'" >&2; exit 2; fi

# The GPU first: without one there is nothing to check, whatever the toolkit.
if [ "$compile_only" = 0 ]; then
  command -v nvidia-smi >/dev/null || skip "no nvidia-smi: no NVIDIA driver on this machine"
  gpus=$(nvidia-smi -L 2>&1) || skip "nvidia-smi finds no GPU: $(echo "$gpus" | head -n1)"
  [ -n "$gpus" ] || skip "nvidia-smi lists no GPU"
  if [ -z "$arch" ]; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>&1 | head -n1)
    [[ $cap =~ ^[0-9]+\.[0-9]+$ ]] || fail "nvidia-smi --query-gpu=compute_cap answered '$cap'"
    arch=${cap/./}
  fi
fi
arch=${arch:-90}

if [ -n "${NVCC:-}" ]; then
  [ -x "$NVCC" ] || fail "NVCC=$NVCC is not an executable"
  nvcc=$NVCC
elif command -v nvcc >/dev/null; then
  nvcc=$(command -v nvcc)
elif [ -x /usr/local/cuda/bin/nvcc ]; then
  nvcc=/usr/local/cuda/bin/nvcc
else
  skip "no nvcc (looked at \$NVCC, PATH and /usr/local/cuda/bin)"
fi
echo "nvcc: $nvcc ($("$nvcc" --version | grep -o 'release [0-9.]*'))"
# A capability newer than the toolkit cannot be compiled for: say so rather than fail in nvcc.
if codes=$("$nvcc" --list-gpu-code 2>/dev/null) && ! grep -qx "sm_$arch" <<<"$codes"; then
  fail "this nvcc cannot compile for sm_$arch (it knows: $(echo $codes))"
fi

if [ -n "${EIGEN_INCLUDE:-}" ]; then eigen=$EIGEN_INCLUDE
elif [ -f /usr/include/eigen3/Eigen/Core ]; then eigen=/usr/include/eigen3
else eigen=$here/eigen_shim
fi
[ -f "$eigen/Eigen/Core" ] || fail "no Eigen/Core under $eigen"
echo "Eigen::half for the CPU arithmetic: $eigen"

build=$(mktemp -d "${TMPDIR:-/tmp}/tfext-gpu-check.XXXXXX")
trap 'rm -rf "$build"' EXIT
mkdir -p "$build/host" "$build/sass" "$build/ptx"
declare -A gencode=([sass]="arch=compute_$arch,code=sm_$arch" [ptx]="arch=compute_$arch,code=compute_$arch")

# The Makefile's flags for each kind of unit (C++17, -O2, nvcc's own math: no fast-math).
# The CPU units and the harness are plain C++: nvcc hands them to its host compiler with the
# CUDA include path (cuda_fp16.h's host conversions).
host_cc() { "$nvcc" -std=c++17 -O2 -DNDEBUG -I"$csrc" -I"$here" -I"$eigen" -x c++ "$@"; }
cuda_cc() { "$nvcc" -std=c++17 -O2 -DNDEBUG -I"$csrc" -x cu -DGOOGLE_CUDA=1 --expt-relaxed-constexpr "$@"; }
compile() {  # OUT COMPILER ARGS... (its log printed only when it fails)
  local out=$1; shift
  "$@" -c -o "$out" >"$out.log" 2>&1 || { echo "compile failed: $*" >&2; cat "$out.log" >&2; return 1; }
}

start=$SECONDS
pids=()
for src in "$csrc"/cpu/*.cc "$here/cpu_reference.cc" "$here/kernel_check.cc"; do
  compile "$build/host/$(basename "$src" .cc).o" host_cc "$src" & pids+=($!)
done
units=0
for src in "$csrc"/cuda/*.cu.cc; do
  units=$((units + 1))
  for m in sass ptx; do
    compile "$build/$m/$(basename "$src" .cu.cc).o" cuda_cc -gencode "${gencode[$m]}" "$src" & pids+=($!)
  done
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ "$failed" = 0 ] || fail "the harness did not compile (nvcc above)"
for m in sass ptx; do
  # -gencode here too: else the link stub nvcc adds is built for its default architecture.
  "$nvcc" -gencode "${gencode[$m]}" -o "$build/kernel_check_$m" "$build/$m"/*.o "$build/host"/*.o \
    || fail "the $m harness did not link"
done
echo "built for sm_$arch and compute_$arch ($units CUDA units) in $((SECONDS - start)) s"

# Prove each binary holds what its mode says: SASS for sm_XY only, or PTX only.
cuobjdump=$(command -v cuobjdump || true)
[ -n "$cuobjdump" ] || [ ! -x "$(dirname "$nvcc")/cuobjdump" ] || cuobjdump=$(dirname "$nvcc")/cuobjdump
[ -n "$cuobjdump" ] || [ ! -x /usr/local/cuda/bin/cuobjdump ] || cuobjdump=/usr/local/cuda/bin/cuobjdump
if [ -n "$cuobjdump" ]; then
  for m in sass ptx; do
    elf=$("$cuobjdump" --list-elf "$build/kernel_check_$m" 2>&1 | grep '^ELF file' || true)
    ptx=$("$cuobjdump" --list-ptx "$build/kernel_check_$m" 2>&1 | grep '^PTX file' || true)
    want=$([ "$m" = sass ] && echo "$elf" || echo "$ptx")
    other=$([ "$m" = sass ] && echo "$ptx" || echo "$elf")
    if [ -n "$other" ] || [ "$(grep -c "sm_$arch\." <<<"$want")" -lt "$units" ] || grep -qv "sm_$arch\." <<<"$want"; then
      fail "kernel_check_$m does not hold exactly $([ "$m" = sass ] && echo "sm_$arch SASS" || echo "compute_$arch PTX"):"$'\n'"$elf"$'\n'"$ptx"
    fi
  done
  echo "cuobjdump: the SASS binary holds sm_$arch ELF and no PTX; the PTX binary PTX and no ELF"
else
  echo "cuobjdump not found: the binaries' SASS/PTX contents are not checked"
fi

if [ "$compile_only" = 1 ]; then
  "$build/kernel_check_sass" --self-check --header || fail "the CPU self-check failed"
  echo "compile-only: OK"
  exit 0
fi

# A hung kernel must not hang the check: each run gets two minutes (they take seconds).
run() { if command -v timeout >/dev/null; then timeout 120 "$@"; else "$@"; fi; }
run "$build/kernel_check_sass" --label "SASS sm_$arch" --header
sass=$?
[ "$sass" != "$SKIP" ] || exit "$SKIP"  # the harness said why (the CUDA runtime sees no GPU)
# No JIT cache: the driver really compiles the PTX now, rather than reusing an earlier run's.
CUDA_CACHE_DISABLE=1 run "$build/kernel_check_ptx" --label "PTX JIT compute_$arch"
ptx=$?
[ "$sass" = 0 ] && [ "$ptx" = 0 ] || fail "kernel_check: SASS run exited $sass, PTX run $ptx (details above)"
echo "PASS: every kernel matches the CPU arithmetic as SASS sm_$arch and as PTX JIT compute_$arch"
