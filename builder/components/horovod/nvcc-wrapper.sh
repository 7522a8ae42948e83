#!/bin/bash
# nvcc for Horovod's CUDA units: nvbuild-step.sh copies it as bin/nvcc of a directory of
# its own (ccache tells nvcc by that name) and sets, for the build:
#   NVBUILD_NVCC_REAL      the toolkit's nvcc
#   NVBUILD_NVCC_ASSEMBLE  capabilities that nvcc does not know, e.g. "100 120" (may be empty)
#   NVBUILD_NVCC_PTX_ARCH  the PTX they are assembled from (nvcc's newest), e.g. 90
#   NVBUILD_NVCC_PTXAS     the newer ptxas that assembles them
#   NVBUILD_NVCC_CCACHE=1  put ccache in front (FindCUDA's nvcc, Horovod before 0.25; with
#                          CMake's CUDA language Horovod's CMakeLists already does)
# and honours the image's NVCC_CCBIN (g++-13 beside Debian 13's GCC 14, which nvcc 12.4
# refuses): it replaces the host compiler CMake names (Horovod gives nvcc its C++ compiler).
# A compile (-c) with capabilities to assemble first writes the unit's PTX for
# compute_PTX_ARCH with the same flags, assembles one cubin per capability with ptxas, and
# hands them to nvcc's fatbinary in an options file: the object holds one fatbin in CUDA's
# own layout, as the extension's Makefile does. Anything else goes to nvcc as it is.
# `--version` adds what it assembles: ccache's identity of this compiler
# (CCACHE_COMPILERCHECK="%compiler% --version") changes with it.
set -u
real=${NVBUILD_NVCC_REAL:?NVBUILD_NVCC_REAL is not set}
assemble=${NVBUILD_NVCC_ASSEMBLE:-}

if [ "${1:-}" = --version ]; then
  "$real" --version || exit
  [ -z "$assemble" ] && exit 0
  echo "nvbuild: sm_${assemble// /, sm_} from compute_${NVBUILD_NVCC_PTX_ARCH:-?} by ptxas $("${NVBUILD_NVCC_PTXAS:?}" --version | tail -n1)"
  exit 0
fi
if [ -n "${NVCC_CCBIN:-}" ]; then
  given=("$@") kept=()
  for ((i = 0; i < ${#given[@]}; i++)); do
    case "${given[i]}" in
      -ccbin|--compiler-bindir) i=$((i + 1)) ;;
      -ccbin=*|--compiler-bindir=*) ;;
      *) kept+=("${given[i]}") ;;
    esac
  done
  set -- -ccbin "$NVCC_CCBIN" "${kept[@]}"
fi
compile=0
for a in "$@"; do [ "$a" = -c ] && compile=1; done
[ "$compile" = 1 ] || exec "$real" "$@"
if [ "${NVBUILD_NVCC_CCACHE:-0}" = 1 ] && [ -z "${NVBUILD_NVCC_IN_CCACHE:-}" ]; then
  NVBUILD_NVCC_IN_CCACHE=1 CCACHE_COMPILERCHECK="%compiler% --version" exec ccache "$0" "$@"
fi
[ -n "$assemble" ] || exec "$real" "$@"

# The PTX: the compile's own flags without its targets, dependency files and output.
args=("$@") ptx_args=() out=""
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -o) i=$((i + 1)); out=${args[i]} ;;
    -gencode|--generate-code|-arch|--gpu-architecture|-code|--gpu-code|-MT|-MF|-MQ) i=$((i + 1)) ;;
    -gencode=*|--generate-code=*|-arch=*|--gpu-architecture=*|-code=*|--gpu-code=*|-c|-MD|-MMD|-M) ;;
    *) ptx_args+=("${args[i]}") ;;
  esac
done
[ -n "$out" ] || { echo "nvcc-wrapper: a compile without -o: cannot place its cubins" >&2; exit 2; }
"$real" "${ptx_args[@]}" "-arch=compute_${NVBUILD_NVCC_PTX_ARCH:?}" -ptx -o "$out.ptx" || exit
options=$out.fatbin-options
: > "$options"
for sm in $assemble; do
  "${NVBUILD_NVCC_PTXAS:?}" "-arch=sm_$sm" -m64 -O3 "$out.ptx" -o "$out.sm_$sm.cubin" || exit
  echo "--image3=kind=elf,sm=$sm,file=$out.sm_$sm.cubin" >> "$options"
done
exec "$real" "$@" -Xfatbin "--options-file=$options"
