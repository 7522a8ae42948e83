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
codes=$("$nvcc" --list-gpu-code 2>/dev/null) || codes=
if [ -n "$codes" ] && ! grep -qx "sm_$arch" <<<"$codes"; then
  fail "this nvcc cannot compile for sm_$arch (it knows: $(echo $codes))"
fi

# Mode "assembled", framework-src/Makefile's ASSEMBLE rule (there, for capabilities newer
# than nvcc): ptxas assembles sm_XY from an older arch PP's PTX, and nvcc's fatbinary takes
# the cubin in through -Xfatbin --options-file (one --image3 line), beside nvcc's own code
# for PP. Here nvcc's own code is sm_PP SASS and no PTX, PP the oldest arch from 75 up that
# nvcc compiles below XY, and of another major than XY: SASS runs only on GPUs of its own
# major, at least its minor (sm_80 runs on an 8.6 GPU, not on a 9.0), so nothing but the
# injected cubin fits the GPU, and a cubin the driver does not load fails the launch ("no
# kernel image is available") instead of falling back to other code.
xy=${arch%%[a-z]*}
pp= ptxas= asm_skip=
for n in $(sed -n 's/^sm_\([0-9][0-9]*\)$/\1/p' <<<"$codes" | sort -n); do
  if [ "$n" -ge 75 ] && [ "$n" -lt "$xy" ]; then pp=$n; break; fi
done
if [ -z "$codes" ]; then
  asm_skip="nvcc --list-gpu-code answered nothing: no older arch to take the PTX from"
elif [ -z "$pp" ]; then
  asm_skip="nvcc compiles no arch from sm_75 up below sm_$arch to take the PTX from"
elif [ $((pp / 10)) = $((xy / 10)) ]; then
  asm_skip="sm_$pp, the oldest arch from 75 up that nvcc compiles below sm_$arch, has its major: sm_$pp SASS would run on an sm_$arch GPU too, and a cubin the driver did not load would go unnoticed"
elif [ -n "${PTXAS:-}" ]; then
  [ -x "$PTXAS" ] || fail "PTXAS=$PTXAS is not an executable"
  ptxas=$PTXAS
else
  for p in "$(dirname "$nvcc")/ptxas" "$(dirname "$(readlink -f "$nvcc")")/ptxas" "$(command -v ptxas)"; do
    if [ -n "$p" ] && [ -x "$p" ]; then ptxas=$p; break; fi
  done
  [ -n "$ptxas" ] || asm_skip="no ptxas beside $nvcc nor on PATH (PTXAS names one)"
fi
modes=(sass ptx)
declare -A label=([sass]="SASS sm_$arch" [ptx]="PTX JIT compute_$arch"
                  [assembled]="SASS sm_$arch via ptxas+fatbinary options file")
declare -A gencode=([sass]="arch=compute_$arch,code=sm_$arch" [ptx]="arch=compute_$arch,code=compute_$arch"
                    [assembled]="arch=compute_$pp,code=sm_$pp")
if [ -z "$asm_skip" ]; then
  modes+=(assembled)
  echo "ptxas: $ptxas ($("$ptxas" --version | grep -o 'release [0-9.]*'))"
else
  echo "assembled mode skipped: $asm_skip"
fi

if [ -n "${EIGEN_INCLUDE:-}" ]; then eigen=$EIGEN_INCLUDE
elif [ -f /usr/include/eigen3/Eigen/Core ]; then eigen=/usr/include/eigen3
else eigen=$here/eigen_shim
fi
[ -f "$eigen/Eigen/Core" ] || fail "no Eigen/Core under $eigen"
echo "Eigen::half for the CPU arithmetic: $eigen"

build=$(mktemp -d "${TMPDIR:-/tmp}/tfext-gpu-check.XXXXXX")
trap 'rm -rf "$build"' EXIT
build=$(cd "$build" && pwd -P)  # absolute: the fatbinary options file names cubins by path
mkdir -p "$build/host" "${modes[@]/#/$build/}"

# The Makefile's flags for each kind of unit (C++17, -O2, nvcc's own math: no fast-math).
# The CPU units and the harness are plain C++: nvcc hands them to its host compiler with the
# CUDA include path (cuda_fp16.h's host conversions).
host_cc() { "$nvcc" -std=c++17 -O2 -DNDEBUG -I"$csrc" -I"$here" -I"$eigen" -x c++ "$@"; }
cuda_cc() { "$nvcc" -std=c++17 -O2 -DNDEBUG -I"$csrc" -x cu -DGOOGLE_CUDA=1 --expt-relaxed-constexpr "$@"; }
compile() {  # OUT COMPILER ARGS... (its log printed only when it fails)
  local out=$1; shift
  "$@" -c -o "$out" >"$out.log" 2>&1 || { echo "compile failed: $*" >&2; cat "$out.log" >&2; return 1; }
}
# The Makefile's three steps for one unit: PTX for compute_PP; ptxas's sm_XY cubin of it,
# named in a fatbinary options file; the object, nvcc's fatbin holding the cubin.
assemble() {  # SRC OUT.o
  local src=$1 out=$2 base=${2%.o}
  { cuda_cc -arch="compute_$pp" -ptx "$src" -o "$base.ptx" &&
    "$ptxas" -arch="sm_$arch" -m64 -O3 "$base.ptx" -o "$base.sm_$arch.cubin" &&
    echo "--image3=kind=elf,sm=$arch,file=$base.sm_$arch.cubin" >"$base.fatbin-options"
  } >"$out.log" 2>&1 || { echo "PTX or ptxas failed for $src:" >&2; cat "$out.log" >&2; return 1; }
  compile "$out" cuda_cc -gencode "${gencode[assembled]}" -Xfatbin --options-file="$base.fatbin-options" "$src"
}

start=$SECONDS
pids=()
for src in "$csrc"/cpu/*.cc "$here/cpu_reference.cc" "$here/kernel_check.cc"; do
  compile "$build/host/$(basename "$src" .cc).o" host_cc "$src" & pids+=($!)
done
units=0
for src in "$csrc"/cuda/*.cu.cc; do
  units=$((units + 1))
  for m in "${modes[@]}"; do
    out=$build/$m/$(basename "$src" .cu.cc).o
    if [ "$m" = assembled ]; then assemble "$src" "$out" & pids+=($!)
    else compile "$out" cuda_cc -gencode "${gencode[$m]}" "$src" & pids+=($!)
    fi
  done
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ "$failed" = 0 ] || fail "the harness did not compile (nvcc above)"
for m in "${modes[@]}"; do
  # -gencode here too: else the link stub nvcc adds is built for its default architecture.
  "$nvcc" -gencode "${gencode[$m]}" -o "$build/kernel_check_$m" "$build/$m"/*.o "$build/host"/*.o \
    || fail "the $m harness did not link"
done
echo "built ($units CUDA units) in $((SECONDS - start)) s:"
for m in "${modes[@]}"; do
  printf '  %-24s %s\n' "kernel_check_$m" "${label[$m]}$([ "$m" != assembled ] ||
    echo " (from compute_$pp PTX; nvcc's own code: sm_$pp SASS, no PTX)")"
done

# Prove each binary holds what its mode says, one image per unit at least: SASS for sm_XY
# and nothing else; PTX and nothing else; the injected sm_XY cubins and nvcc's sm_PP SASS,
# no PTX. The lister is cuobjdump where found, else builder/in_image/fatbin.py's reader,
# which also reads the kernels (entry functions) out of the cubins' symbol tables.
cuobjdump=$(command -v cuobjdump || true)
[ -n "$cuobjdump" ] || [ ! -x "$(dirname "$nvcc")/cuobjdump" ] || cuobjdump=$(dirname "$nvcc")/cuobjdump
[ -n "$cuobjdump" ] || [ ! -x /usr/local/cuda/bin/cuobjdump ] || cuobjdump=/usr/local/cuda/bin/cuobjdump
reader() {  # BINARY [ARCH]: one line per code image ("ELF sm_90", "PTX sm_90": cuobjdump's
            # naming); with ARCH, the kernels its sm_ARCH cubins define, sorted
  python3 - "$here/../../builder/in_image" "$@" <<'EOF'
import struct, sys
sys.path.insert(0, sys.argv[1])
import fatbin as ir  # noqa: E402
data = open(sys.argv[2], "rb").read()
arch = int(sys.argv[3]) if len(sys.argv) > 3 else None
read = lambda n, offset: data[offset:offset + n]  # noqa: E731
sections = ir.elf_sections(read) or {}
if ir.FATBIN_SECTION not in sections:
    sys.exit(f"{sys.argv[2]}: no {ir.FATBIN_SECTION} section")
kernels = set()
for _container, kind, a, flags, at, size in ir.fatbin_entries(read, *sections[ir.FATBIN_SECTION]):
    if arch is None:
        print("ELF" if kind in ir.SASS_KINDS else "PTX" if kind == ir.KIND_PTX else f"kind{kind}", f"sm_{a}")
    elif kind in ir.SASS_KINDS and a == arch:
        cubin = data[at:at + size]
        cs = ir.elf_sections(lambda n, offset: cubin[offset:offset + n])
        if flags & ir.FLAG_COMPRESSED or not cs or ".symtab" not in cs or ".strtab" not in cs:
            sys.exit(f"an sm_{a} cubin is compressed or has no symbol table")
        (symtab, symsize), (strtab, _) = cs[".symtab"], cs[".strtab"]
        for sym in range(symtab, symtab + symsize - 23, 24):
            name, info, other = struct.unpack_from("<IBB", cubin, sym)
            if info & 0xF == 2 and other & 0x10:  # STT_FUNC, STO_CUDA_ENTRY: a kernel
                kernels.add(cubin[strtab + name:cubin.index(b"\0", strtab + name)].decode())
print(*sorted(kernels), sep="\n")
EOF
}
images() {  # BINARY
  if [ -n "$cuobjdump" ]; then
    { "$cuobjdump" --list-elf "$1"; "$cuobjdump" --list-ptx "$1"; true; } 2>&1 | awk '/^(ELF|PTX) file/ {
      if (match($0, /\.sm_[0-9]+[a-z]*\.(cubin|ptx)$/)) { s = substr($0, RSTART + 1, RLENGTH - 1)
        sub(/\.(cubin|ptx)$/, "", s); print $1, s } else print "unread:", $0 }'
  else
    reader "$1"
  fi
}
if [ -n "$cuobjdump" ]; then lister=cuobjdump
elif command -v python3 >/dev/null && reader "$build/kernel_check_sass" >/dev/null; then lister="the fatbin reader"
else lister=
fi
if [ -n "$lister" ]; then
  echo "code images ($lister):"
  for m in "${modes[@]}"; do
    want=("ELF sm_$arch")
    [ "$m" != ptx ] || want=("PTX sm_$arch")
    [ "$m" != assembled ] || want+=("ELF sm_$pp")
    list=$(images "$build/kernel_check_$m") || fail "cannot list kernel_check_$m's code: $list"
    ok=1
    for w in "${want[@]}"; do [ "$(grep -cxF "$w" <<<"$list")" -ge "$units" ] || ok=0; done
    ! grep -qvxF "$(printf '%s\n' "${want[@]}")" <<<"$list" || ok=0
    [ "$ok" = 1 ] || fail "kernel_check_$m holds other than ${want[*]} (each at least $units times):"$'\n'"$list$(
      [ -z "$cuobjdump" ] || { echo; "$cuobjdump" --list-elf "$build/kernel_check_$m"; "$cuobjdump" --list-ptx "$build/kernel_check_$m"; } 2>&1)"
    printf '  %-24s %s\n' "kernel_check_$m" "$(sort <<<"$list" | uniq -c | awk '{ printf "%s%s %s x%s", sep, $2, $3, $1; sep = ", " }')"
  done
else
  echo "neither cuobjdump nor a working fatbin reader (python3, builder/in_image/fatbin.py): the binaries' code images are not checked"
fi
if [[ " ${modes[*]} " == *" assembled "* ]]; then
  # The injected cubins must define every kernel nvcc's own code does, by the same names:
  # the runtime registers kernels by name, and a missing one fails its launch on the GPU.
  why=
  if ! command -v python3 >/dev/null; then why="no python3"
  elif ! injected=$(reader "$build/kernel_check_assembled" "$xy" 2>&1); then why=$(tail -n1 <<<"$injected")
  elif ! own=$(reader "$build/kernel_check_assembled" "$pp" 2>&1); then why=$(tail -n1 <<<"$own")
  elif [ -z "$own" ] || [ "$injected" != "$own" ]; then
    fail "the injected sm_$arch cubins' kernels differ from nvcc's sm_$pp ones:"$'\n'"$(diff <(echo "$own") <(echo "$injected"))"
  fi
  if [ -n "$why" ]; then echo "kernels of the injected cubins not compared: $why"
  else echo "kernels: the injected sm_$arch cubins define the $(wc -l <<<"$own") that nvcc's sm_$pp code defines, by name"
  fi
fi

if [ "$compile_only" = 1 ]; then
  "$build/kernel_check_sass" --self-check --header || fail "the CPU self-check failed"
  echo "compile-only: OK"
  exit 0
fi

# A hung kernel must not hang the check: each run gets two minutes (they take seconds).
run() { if command -v timeout >/dev/null; then timeout 120 "$@"; else "$@"; fi; }
declare -A rc=()
for m in "${modes[@]}"; do
  # No JIT cache: the driver really compiles the PTX now, rather than reusing an earlier
  # run's; and the assembled binary has no PTX a cache could stand in for the cubin with.
  if [ "$m" = sass ]; then run "$build/kernel_check_$m" --label "${label[$m]}" --header
  else CUDA_CACHE_DISABLE=1 run "$build/kernel_check_$m" --label "${label[$m]}"
  fi
  rc[$m]=$?
  [ "${rc[sass]}" != "$SKIP" ] || exit "$SKIP"  # the harness said why (the CUDA runtime sees no GPU)
done
for m in "${modes[@]}"; do
  [ "${rc[$m]}" = 0 ] || fail "kernel_check: $(for m in "${modes[@]}"; do printf '%s run exited %s; ' "$m" "${rc[$m]}"; done)details above"
done
pass="SASS sm_$arch and as PTX JIT compute_$arch"
[ -n "$asm_skip" ] || pass="SASS sm_$arch, as PTX JIT compute_$arch and as sm_$arch SASS that ptxas assembled from compute_$pp PTX"
echo "PASS: every kernel matches the CPU arithmetic as $pass"
[ -z "$asm_skip" ] || echo "NOTE: the assembled mode was skipped: $asm_skip"
