#!/usr/bin/env bash
# nvbuild.sh: compile and install what the image compiles: the framework source in
# /opt/tensorflow/tensorflow-source (the project's TensorFlow extension, or a TensorFlow
# checkout), and each compiled component whose step (components/NAME/nvbuild-step.sh:
# Horovod, DALI's TensorFlow plugin) is shipped beside it.
#
# The single source of truth for building: the release image runs it and so does every
# derived image (patch-and-rebuild), so both build the same way. Extra build flags come
# from the flags file next to this script (nvbuildopts), one per line.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=${NVBUILD_SOURCE:-$HERE/tensorflow-source}
FLAGS_FILE=${NVBUILD_FLAGS_FILE:-$HERE/nvbuildopts}
POLICY=$HERE/cuda_arch.py
REPORT_SCRIPT=${NVBUILD_REPORT_SCRIPT:-$HERE/image_report.py}
WHEEL_DIR=${NVBUILD_WHEEL_DIR:-/tmp/pip}
BUILD_INFO=${NVBUILD_BUILD_INFO:-$HERE/build-info.json}
STAMP=$SRC/.nvbuild-config
MANIFEST=$HERE/.source-manifest
PATCHES_DIR=$HERE/patches

usage() {
  cat <<'USAGE'
Usage: nvbuild.sh [options]
  --sm LIST|all|local  compute capabilities to build: a list (7.0,8.6), 'all' (the
                       release's list baked into the image) or 'local' (the GPUs visible
                       now; fails when there are none). Default: $TF_CUDA_COMPUTE_CAPABILITIES.
  --allow-ptx-jit      accept capabilities newer than this CUDA can compile: they run by
                       PTX JIT of the newest one it can (which is then compiled too)
  --only extension|COMPONENT
                       build only the framework source (TensorFlow extension or TensorFlow)
                       or only one compiled component (horovod, dali: DALI's TensorFlow
                       plugin). Default: all, the framework first, then the components in
                       name order.
  --configonly         configure the framework, then stop (no component is built)
  --noclean            keep build state (objects, bazel output, Horovod's build directory)
                       for a faster rebuild
  --clean              wipe build state and configuration before building; a component is
                       rebuilt even when it is up to date
  --python3.X          build for /usr/bin/python3.X instead of the default python3
  --cache URL          use a shared HTTP compile cache (ccache remote storage for the
                       extension and for Horovod's C++ and CUDA compiles, bazel
                       --remote_cache for TensorFlow); trouble with the cache falls back to
                       a normal compile
  --v1 | --v2          TensorFlow API generation (TensorFlow trees; default from nvbuildopts)
  --repository-cache DIR
                       bazel --repository_cache=DIR (TensorFlow trees; created if missing):
                       downloads by sha256, kept between builds; a filled one lets an
                       air-gapped build fetch nothing. Also $NVBUILD_BAZEL_REPOSITORY_CACHE.
                       For 2.18+ trees the default is $NVBUILD_LOCAL_CACHE/bazel-repository-cache
                       when that is mounted (below).
  --distdir DIR        bazel --distdir=DIR (TensorFlow trees; repeatable): archives looked
                       up by file name before any download. Also $NVBUILD_BAZEL_DISTDIR
                       (DIR:DIR...). Each must be an existing directory.
  --remote-executor URL
                       bazel --remote_executor=URL (TensorFlow 2.18+ trees): a REAPI build
                       farm (BuildBuddy, Buildbarn, ...), grpc://, grpcs:// or unix:; it is
                       also the remote cache unless --cache names one. No credentials are
                       passed. Also $NVBUILD_REMOTE_EXECUTOR.
  --remote-instance-name NAME
                       bazel --remote_instance_name (with --remote-executor). Also
                       $NVBUILD_REMOTE_INSTANCE_NAME.
  -h, --help           this text

TensorFlow trees (a checkout with configure.py and tensorflow/), by the version the tree
declares (tensorflow/tf_version.bzl, else TF_MAJOR/MINOR_VERSION in
tensorflow/core/public/{release_version,version}.h, else _VERSION in
tensorflow/tools/pip_package/setup.py):
  up to 2.15   yes "" | python configure.py (TF_* from this image: its CUDA), then
               bazel build [nvbuildopts] [--config=v1|v2] [cache] [fetch flags]
                 //tensorflow/tools/pip_package:build_pip_package
               bazel-bin/tensorflow/tools/pip_package/build_pip_package DIR --gpu --project_name tensorflow
  2.18 on      hermetic CUDA: Bazel downloads CUDA, cuDNN and NCCL (or takes LOCAL_*_PATH)
               and a Python of this Python's version (HERMETIC_PYTHON_VERSION);
               yes "" | python configure.py (TF_NEED_CUDA, HERMETIC_*, TF_CUDA_CLANG=0:
               nvcc with the image's gcc unless set), then
               bazel build [nvbuildopts less --config=cuda] [--config=v1|v2]
                 --config=cuda --config=cuda_wheel
                 --repo_env=HERMETIC_CUDA_VERSION=X.Y.Z --repo_env=HERMETIC_CUDNN_VERSION=X.Y.Z
                 --repo_env=HERMETIC_CUDA_COMPUTE_CAPABILITIES=sm_60,...,compute_90
                 [--repo_env=LOCAL_CUDA_PATH=... LOCAL_CUDNN_PATH LOCAL_NCCL_PATH]
                 --repo_env=HERMETIC_PYTHON_VERSION=3.X --repo_env=WHEEL_NAME=tensorflow
                 [--repository_cache=DIR] [--distdir=DIR...] [--remote_cache=URL ...]
                 [--remote_executor=URL [--remote_instance_name=NAME]]
                 //tensorflow/tools/pip_package:wheel
               and installs bazel-bin/tensorflow/tools/pip_package/wheel_house/*.whl.
               Capabilities: --sm's list, SASS (sm_XY) for each and PTX (compute_XY) for
               the newest. CUDA: the newest this image compiles with (nvcc, or a newer ptxas
               of its major), cuDNN: the image's cudnn_version.h; each matched to the
               versions the tree's cuda_redist_versions.bzl lists, when it has one.
               HERMETIC_CUDA_VERSION / HERMETIC_CUDNN_VERSION in the environment win (empty:
               the tree's default), and so does a --repo_env=NAME=... in nvbuildopts.
               Without nvcc: a CPU-only wheel. Needs bazel (or bazelisk) on PATH.
  2.16, 2.17   refused (hermetic Python with the local CUDA toolkit: neither way above),
               and so is a tree whose version cannot be read.

Components: each /opt/tensorflow/components/NAME/nvbuild-step.sh (the image's compiled
components, builder/components/NAME/) is sourced and defines build_NAME, which copies the
pristine source, applies /opt/tensorflow/patches/NAME/*.patch in name order, compiles
against the installed TensorFlow and installs with pip (no dependencies, no index); a
stamp skips an up-to-date rebuild ("NAME: up to date, not rebuilt"). horovod: Horovod
from /opt/tensorflow/horovod-source, for the same capabilities as the framework; dali:
DALI's TensorFlow plugin from /opt/tensorflow/dali-tf-plugin-source (their headers say
more).

Local compile cache: when $NVBUILD_LOCAL_CACHE (default /var/cache/nvbuild) is a mount
point (BuildKit's `RUN --mount=type=cache`, as the image Dockerfiles mount it), ccache
keeps its objects there between builds on this machine (--cache replaces it with the
shared cache), and so does bazel its downloads for a TensorFlow 2.18+ tree
(bazel-repository-cache/, unless --repository-cache names another). A plain directory
there is never used (it would go into the layer).

Environment: TF_ENABLE_XLA, TF_NEED_GCP, TF_NEED_HDFS (0/1) decide the optional parts.
  NVBUILD_HOROVOD=0    do not build Horovod (its step says more)
Output (stderr): phase timings `nvbuild.sh: <phase> phase took N.NNs` (compile, install,
horovod patch, horovod compile, horovod install, report); the translation units really
compiled, `nvbuild.sh: compiled: <unit>` (the extension's and Horovod's, named horovod/...,
whenever ccache is installed: every compile goes through it, a local cache without
--cache), after `nvbuild.sh: compile cache: N of M translation units from the cache` with
--cache or the mounted local cache; failures as `nvbuild.sh: <phase> phase failed: <why>`. Last, it writes
/opt/tensorflow/build-info.json with image_report.py next to this script
(NVBUILD_REPORT_SCRIPT names another report script).
USAGE
}

log() { echo "nvbuild.sh: $*" >&2; }

# One locale for every build: compiler output, and the compile cache's keys (ccache
# hashes the locale), must not depend on where in the image's layers the build runs.
export LC_ALL=C.UTF-8
unset LANG LANGUAGE
fail() {  # fail PHASE MESSAGE: every failure names its phase
  log "$1 phase failed: $2"
  exit 1
}
now() { date +%s.%N; }
took() {  # took PHASE START: the timing line the bench reads
  log "$1 phase took $(awk -v a="$2" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}')s"
}

SM=${TF_CUDA_COMPUTE_CAPABILITIES:-all}
ALLOW_PTX_JIT=""
CONFIGONLY=0
CLEAN_AFTER=1
CLEAN_BEFORE=0
ONLY=""
PYTHON=${PYTHON_BIN_PATH:-$(command -v python3 || true)}
CACHE_URL=${NVBUILD_CACHE_URL:-}
API=""
# bazel's downloads and remote execution (TensorFlow trees)
REPOSITORY_CACHE=${NVBUILD_BAZEL_REPOSITORY_CACHE:-}
DISTDIRS=()
[ -n "${NVBUILD_BAZEL_DISTDIR:-}" ] && IFS=: read -ra DISTDIRS <<< "$NVBUILD_BAZEL_DISTDIR"
REMOTE_EXECUTOR=${NVBUILD_REMOTE_EXECUTOR:-}
REMOTE_INSTANCE=${NVBUILD_REMOTE_INSTANCE_NAME:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --sm) [ $# -ge 2 ] || { log "--sm needs a value"; exit 2; }; SM=$2; shift ;;
    --sm=*) SM=${1#--sm=} ;;
    --allow-ptx-jit) ALLOW_PTX_JIT=--allow-ptx-jit ;;
    --only) [ $# -ge 2 ] || { log "--only needs 'extension' or a component"; exit 2; }; ONLY=$2; shift ;;
    --only=*) ONLY=${1#--only=} ;;
    --configonly) CONFIGONLY=1 ;;
    --noclean) CLEAN_AFTER=0 ;;
    --clean) CLEAN_BEFORE=1 ;;
    --python3.*)
      PYTHON=/usr/bin/python${1#--python}
      [ -x "$PYTHON" ] || { log "$1: $PYTHON is not installed in this image"; exit 2; } ;;
    --cache) [ $# -ge 2 ] || { log "--cache needs a URL"; exit 2; }; CACHE_URL=$2; shift ;;
    --cache=*) CACHE_URL=${1#--cache=} ;;
    --v1|--v2) API=${1#--} ;;
    --repository-cache) [ $# -ge 2 ] || { log "--repository-cache needs a directory"; exit 2; }; REPOSITORY_CACHE=$2; shift ;;
    --repository-cache=*) REPOSITORY_CACHE=${1#--repository-cache=} ;;
    --distdir) [ $# -ge 2 ] || { log "--distdir needs a directory"; exit 2; }; DISTDIRS+=("$2"); shift ;;
    --distdir=*) DISTDIRS+=("${1#--distdir=}") ;;
    --remote-executor) [ $# -ge 2 ] || { log "--remote-executor needs a URL"; exit 2; }; REMOTE_EXECUTOR=$2; shift ;;
    --remote-executor=*) REMOTE_EXECUTOR=${1#--remote-executor=} ;;
    --remote-instance-name) [ $# -ge 2 ] || { log "--remote-instance-name needs a name"; exit 2; }; REMOTE_INSTANCE=$2; shift ;;
    --remote-instance-name=*) REMOTE_INSTANCE=${1#--remote-instance-name=} ;;
    -h|--help) usage; exit 0 ;;
    *) log "UNKNOWN OPTION $1 (see nvbuild.sh --help)"; exit 2 ;;
  esac
  shift
done
# The compiled components this image ships (builder/components/NAME/nvbuild-step.sh, each
# defining build_NAME), in name order.
COMPONENT_STEPS=()
for step in "$HERE"/components/*/nvbuild-step.sh; do
  [ -f "$step" ] || continue
  # shellcheck source=/dev/null
  . "$step"
  COMPONENT_STEPS+=("$(basename "$(dirname "$step")")")
done
case " extension ${COMPONENT_STEPS[*]} " in
  *" ${ONLY:-extension} "*) ;;
  *) log "--only $ONLY: expected one of: extension ${COMPONENT_STEPS[*]}"; exit 2 ;;
esac
# bazel runs in the source tree: directories become absolute; a missing distdir would
# mean a silent download (or, air-gapped, a failure deep in bazel's fetch)
FETCH_FLAGS=()
if [ -n "$REPOSITORY_CACHE" ]; then
  mkdir -p "$REPOSITORY_CACHE" 2>/dev/null || { log "--repository-cache $REPOSITORY_CACHE: cannot create it"; exit 2; }
  FETCH_FLAGS+=("--repository_cache=$(cd "$REPOSITORY_CACHE" && pwd)")
fi
for d in "${DISTDIRS[@]}"; do
  [ -d "$d" ] || { log "--distdir $d: not a directory"; exit 2; }
  FETCH_FLAGS+=("--distdir=$(cd "$d" && pwd)")
done
case "$REMOTE_EXECUTOR" in
  ""|grpc://?*|grpcs://?*|unix:?*) ;;
  *) log "--remote-executor $REMOTE_EXECUTOR: expected a REAPI endpoint, grpc://HOST:PORT, grpcs://HOST:PORT or unix:PATH"; exit 2 ;;
esac
[ -z "$REMOTE_INSTANCE" ] || [ -n "$REMOTE_EXECUTOR" ] || { log "--remote-instance-name needs --remote-executor"; exit 2; }
BUILD_FRAMEWORK=1; BUILD_COMPONENTS=("${COMPONENT_STEPS[@]}")
case "$ONLY" in
  "") ;;
  extension) BUILD_COMPONENTS=() ;;
  *) BUILD_FRAMEWORK=0; BUILD_COMPONENTS=("$ONLY") ;;
esac
[ "$CONFIGONLY" = 1 ] && BUILD_COMPONENTS=()

[ "$BUILD_FRAMEWORK" = 0 ] || [ -d "$SRC" ] || fail configure "no source tree at $SRC"
[ -x "$PYTHON" ] || fail configure "no Python at '$PYTHON'"

# Temporary directories of this run (Horovod's build, the NCCL prefix, ccache's local
# storage and logs) live under one directory, removed at exit.
WORK=$(mktemp -d /tmp/nvbuild.XXXXXX) || fail configure "cannot create a temporary directory"
cleanup() { [ -n "${WORK:-}" ] && rm -rf "$WORK"; }
trap cleanup EXIT

# --- toolkit versions, discovered from the image rather than repeated -------------------
cuda_release() {  # cuda_release TOOL: the CUDA release (MAJOR.MINOR) nvcc or ptxas says it is
  "$1" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p' | head -n1
}
CUDA_VER=""
NVCC_BIN=$(command -v nvcc || true)
if [ -n "$NVCC_BIN" ]; then
  CUDA_VER=$(cuda_release "$NVCC_BIN")
fi
# NVIDIA's library wheels (nvidia-cudnn-cu11, nvidia-nccl-cu11, ...) install
# site-packages/nvidia/<lib>/{include,lib}: their package directories, one per line.
WHEEL_PKGS=$("$PYTHON" - <<'PY' 2>/dev/null
import glob, os, site, sysconfig
roots = []
try:
    import nvidia
    roots += list(nvidia.__path__)
except Exception:
    pass
paths = sysconfig.get_paths()
for sp in [paths.get("purelib"), paths.get("platlib")] + list(getattr(site, "getsitepackages", lambda: [])()):
    if sp:
        roots.append(os.path.join(sp, "nvidia"))
seen = []
for root in roots:
    for inc in sorted(glob.glob(os.path.join(root, "*", "include"))):
        pkg = os.path.realpath(os.path.dirname(inc))
        if pkg not in seen:
            seen.append(pkg)
            print(pkg)
PY
)
HEADER_DIRS=(/usr/include /usr/local/cuda/include /usr/include/x86_64-linux-gnu)
while IFS= read -r pkg; do [ -n "$pkg" ] && HEADER_DIRS+=("$pkg/include"); done <<< "$WHEEL_PKGS"
header_path() {  # header_path FILE: the first directory of HEADER_DIRS that has it
  local d
  for d in "${HEADER_DIRS[@]}"; do [ -r "$d/$1" ] && { echo "$d/$1"; return; }; done
}
header_version() {  # header_version FILE MAJOR_MACRO: the major version a header declares
  local f
  f=$(header_path "$1")
  [ -n "$f" ] && sed -n "s/^#define $2 *\([0-9]*\).*/\1/p" "$f" | head -n1
}
CUDNN_VER=$(header_version cudnn_version.h CUDNN_MAJOR)
[ -n "$CUDNN_VER" ] || CUDNN_VER=$(header_version cudnn.h CUDNN_MAJOR)
NCCL_VER=$(header_version nccl.h NCCL_MAJOR)
TRT_VER=$(header_version NvInferVersion.h NV_TENSORRT_MAJOR)

# --- compute capabilities ---------------------------------------------------------------
probe_local_gpus() {
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -u | paste -sd, -
  fi
}
if [ "$SM" = local ]; then
  SM=$(probe_local_gpus)
  [ -n "$SM" ] || fail configure "--sm local: no GPU is visible at build time (use --sm LIST or --sm all)"
  log "local GPUs: $SM"
fi
# A newer ptxas of the same CUDA major (NVIDIA's nvidia-cuda-nvcc wheel carries ptxas
# alone) assembles capabilities this nvcc does not know from its newest PTX: the
# extension's configure puts those cubins into nvcc's own fatbin.
PTXAS_BIN="" PTXAS_VER=""
if [ -n "$CUDA_VER" ]; then
  while IFS= read -r pkg; do
    [ -x "$pkg/bin/ptxas" ] || continue
    v=$(cuda_release "$pkg/bin/ptxas")
    [ "${v%%.*}" = "${CUDA_VER%%.*}" ] || continue
    if [ "$(printf '%s\n' "${PTXAS_VER:-$CUDA_VER}" "$v" | sort -V | tail -n1)" = "$v" ] && [ "$v" != "${PTXAS_VER:-$CUDA_VER}" ]; then
      PTXAS_BIN=$pkg/bin/ptxas PTXAS_VER=$v
    fi
  done <<< "$WHEEL_PKGS"
  [ -n "$PTXAS_BIN" ] && log "ptxas $PTXAS_VER beside nvcc $CUDA_VER: $PTXAS_BIN"
fi
export TF_CUDA_PTXAS=$PTXAS_BIN
SM_ALL=${NVBUILD_SM_ALL:-$SM}
if [ -n "$CUDA_VER" ]; then
  # shellcheck disable=SC2086  # empty, or the one word --allow-ptx-jit
  resolved=$("$PYTHON" "$POLICY" resolve "$SM" "$CUDA_VER" "$SM_ALL" $ALLOW_PTX_JIT --ptxas "$PTXAS_VER") \
    || fail configure "compute capabilities '$SM' rejected"
  SM=$resolved
fi
# What nvcc alone compiles: TensorFlow's configure.py (trees up to 2.15) and Horovod's CMake
# have no ptxas step, so what only the newer ptxas assembles runs there by PTX JIT of
# nvcc's newest (the extension and hermetic TensorFlow take $SM whole).
SM_NVCC=$SM
if [ -n "$PTXAS_VER" ] && [ -n "$CUDA_VER" ]; then
  SM_NVCC=$("$PYTHON" "$POLICY" resolve "$SM" "$CUDA_VER" "" --allow-ptx-jit) \
    || fail configure "compute capabilities '$SM' rejected"
fi

# --- the configure contract TensorFlow's configure reads --------------------------------
export TF_NEED_CUDA=$([ -n "$CUDA_VER" ] && echo 1 || echo 0)
export TF_CUDA_COMPUTE_CAPABILITIES=$SM
export TF_CUDA_VERSION=$CUDA_VER
export TF_CUDNN_VERSION=$CUDNN_VER
export TF_NCCL_VERSION=$NCCL_VER
export TF_NEED_TENSORRT=$([ -n "$TRT_VER" ] && echo 1 || echo 0)
export TF_ENABLE_XLA=${TF_ENABLE_XLA:-1}
export TF_NEED_GCP=${TF_NEED_GCP:-0}
export TF_NEED_HDFS=${TF_NEED_HDFS:-0}
export PYTHON_BIN_PATH=$PYTHON
export CC_OPT_FLAGS=${CC_OPT_FLAGS:--O2 -march=x86-64 -mtune=generic}
export TF_CUDA_ARCH_POLICY=$POLICY
if [ -z "${TF_CUDA_PATHS:-}" ]; then
  TF_CUDA_PATHS=/usr,/usr/local/cuda
  while IFS= read -r pkg; do [ -n "$pkg" ] && TF_CUDA_PATHS+=",$pkg"; done <<< "$WHEEL_PKGS"
fi
export TF_CUDA_PATHS

# --- compile cache: a shared HTTP cache; any trouble with it means a plain compile ------
CACHE_CHECKED=0
check_cache() {  # once per run, right before the first compile
  [ "$CACHE_CHECKED" = 1 ] && return
  CACHE_CHECKED=1
  [ -n "$CACHE_URL" ] || return
  if ! "$PYTHON" - "${CACHE_URL%%|*}" <<'PY'
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/.ping", timeout=3)
except urllib.error.HTTPError:
    pass  # any HTTP answer means the server is there
except Exception:
    sys.exit(1)
PY
  then
    log "warning: compile cache ${CACHE_URL%%|*} does not answer; compiling without it"
    CACHE_URL=""
  fi
}
have_http_ccache() { command -v ccache >/dev/null 2>&1 && ccache --version | grep -q http-storage; }

# A compile cache kept on this machine between builds: BuildKit's cache mount at
# $LOCAL_CACHE (the image Dockerfiles mount it on nvbuild.sh's RUN steps). Used only when
# it is a mount point: a plain directory there would put the cache into the image's layer.
LOCAL_CACHE=${NVBUILD_LOCAL_CACHE:-/var/cache/nvbuild}
is_mount_point() { awk -v d="$1" '$5 == d { found = 1 } END { exit !found }' /proc/self/mountinfo; }
LOCAL_CCACHE=""
is_mount_point "$LOCAL_CACHE" && LOCAL_CCACHE=$LOCAL_CACHE/ccache
cache_in_use() { [ -n "$CACHE_URL" ] || [ -n "$LOCAL_CCACHE" ]; }

CCACHE_VARS=()
ccache_vars() {  # ccache_vars BASEDIR LOGFILE LOCAL_DIR: the ccache settings of one build, in CCACHE_VARS
  local dir=$3
  # --cache: the shared cache only (as on every machine that shares it); else the mounted local one
  [ -z "$CACHE_URL" ] && [ -n "$LOCAL_CCACHE" ] && dir=$LOCAL_CCACHE
  CCACHE_VARS=(CCACHE_DIR="$dir" CCACHE_BASEDIR="$1" CCACHE_NOHASHDIR=true CCACHE_COMPILERCHECK=content
               CCACHE_LOGFILE="$2" CCACHE_TEMPDIR="$dir/tmp")
  if [ -n "$CACHE_URL" ]; then
    local remote=$CACHE_URL
    # A slow or full server costs a bounded wait and a miss, never a failed build.
    case "$remote" in *"|"*) ;; *) remote="$remote|connect-timeout=2000|operation-timeout=20000" ;; esac
    CCACHE_VARS+=(CCACHE_REMOTE_STORAGE="$remote" CCACHE_REMOTE_ONLY=true)
  else
    CCACHE_VARS+=(CCACHE_REMOTE_STORAGE=)
  fi
}

units_report() {  # units_report LOGFILE [SOURCES_LIST PREFIX]: which translation units were really compiled
  # Without SOURCES_LIST the units are named as the compiler was given them. With it (the
  # files of the source tree, relative to its root), the root of the tree the build
  # compiled from (a copy pip made) is found from the compiled files that are in the list;
  # units are named by their path under that root, PREFIX prepended unless the path starts
  # with it. Compiles outside the tree or under its build/ directory (CMake's probes) are
  # not counted.
  "$PYTHON" - "$(cache_in_use && echo cached)" "$@" <<'PY' >&2
import os, re, sys
cached, log = bool(sys.argv[1]), sys.argv[2]
known = None
if len(sys.argv) > 3:
    known = {os.path.normpath(l.strip()) for l in open(sys.argv[3]) if l.strip()}
    prefix = sys.argv[4]

units, current, cwd = [], {}, {}
for line in open(log, errors="replace"):
    m = re.match(r"^\[\S+ (\d+)\s*\] (Working directory|Source file|Result): (.*)$", line)
    if not m:
        continue
    pid, kind, value = m.groups()
    value = value.strip()
    if kind == "Working directory":
        cwd[pid] = value
    elif kind == "Source file":  # a new compile in this process (pids can be reused later)
        current[pid] = len(units)
        path = value if os.path.isabs(value) or pid not in cwd else os.path.join(cwd[pid], value)
        units.append((value if known is None else os.path.normpath(path), set()))
    elif pid in current:
        units[current[pid]][1].add(value)

roots = set()
if known is not None:
    for path, _ in units:
        parts = path.split(os.sep)
        for i in range(1, len(parts)):
            if os.path.join(*parts[i:]) in known:
                roots.add(os.sep.join(parts[:i]))
                break

def name(path):
    if known is None:
        return path
    for root in sorted(roots, key=len, reverse=True):
        if path.startswith(root + os.sep):
            rel = path[len(root) + 1:]
            if rel.startswith("build" + os.sep):
                return None
            return rel if rel.startswith(prefix) else prefix + rel
    return None

NOT_A_COMPILE = {"called_for_link", "called_for_preprocessing", "no_input_file"}
HIT = {"direct_cache_hit", "preprocessed_cache_hit"}
counted, compiled = 0, set()
for path, results in units:
    unit = name(path)
    if unit is None or (results and results <= NOT_A_COMPILE):
        continue
    counted += 1
    if not results & HIT:
        compiled.add(unit)
if cached:
    print(f"nvbuild.sh: compile cache: {counted - len(compiled)} of {counted} translation units from the cache")
for unit in sorted(compiled):
    print(f"nvbuild.sh: compiled: {unit}")
PY
}

# What nvbuild.sh installs it built itself, so its installs ignore the image's pins
# (PIP_CONSTRAINT=: a patch may change a version) and then pin what they installed.
refresh_constraints() {  # the pins are python3's (--python3.X installs into another Python: left as they are)
  command -v pip-constraints >/dev/null 2>&1 || return 0
  [ "$(readlink -f "$PYTHON")" = "$(readlink -f "$(command -v python3)")" ] || return 0
  pip-constraints >&2 || fail constraints "pip-constraints exited $?"
}
install_built() {  # install_built PHASE WHEEL...: what this script built, then pinned
  local phase=$1 rc
  shift
  # shellcheck disable=SC2046
  PIP_CONSTRAINT= "$PYTHON" -m pip install -q $(pip_flags) "$@" 2>&1 | grep -v "Running pip as the 'root' user" >&2
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || fail "$phase" "pip install exited $rc"
  refresh_constraints
}

pip_flags() {  # the flags every pip install here uses
  local flags=(--no-deps --no-index --force-reinstall --no-cache-dir)
  if compgen -G "/usr/lib/python3*/EXTERNALLY-MANAGED" >/dev/null; then flags+=(--break-system-packages); fi
  echo "${flags[@]}"
}

# --- patches and source manifest: what differs from the source the image shipped -------
patch_records() {  # patch_records FILE...: [{"name", "sha256"}] in the given order
  "$PYTHON" - "$@" <<'PY'
import hashlib, json, pathlib, sys
print(json.dumps([{"name": pathlib.Path(p).name, "sha256": hashlib.sha256(pathlib.Path(p).read_bytes()).hexdigest()}
                  for p in sys.argv[1:]]))
PY
}
patch_files() {  # patch_files DIR: its *.patch files, in name order, one per line (none: no DIR)
  [ -d "$1" ] && find "$1" -maxdepth 1 -type f -name '*.patch' | LC_ALL=C sort
  return 0
}
apply_patches() {  # apply_patches NAME DIR PATCH...: each at DIR's root (patch -p1), in order; a failure names it
  local name=$1 dir=$2 p out
  shift 2
  for p in "$@"; do
    log "$name: applying $(basename "$p")"
    if ! out=$(cd "$dir" && patch -p1 --forward --batch < "$p" 2>&1); then
      printf '%s\n' "$out" >&2
      fail "$name patch" "$(basename "$p")"
    fi
  done
}
source_files() {  # the files of the source tree that are source (not build products), NUL-separated
  find . -type f ! -path './build/*' ! -path './bazel-*' ! -name '.tf_configure.bazelrc' ! -name config.mk \
    ! -name '.nvbuild-config' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z
}
record_source() {  # NVBUILD_MODIFIED_JSON: files changed, added or removed since the image shipped
  if [ ! -f "$MANIFEST" ]; then
    source_files | xargs -0 -r sha256sum > "$MANIFEST"
  fi
  export NVBUILD_MODIFIED_JSON
  NVBUILD_MODIFIED_JSON=$(source_files | "$PYTHON" -c '
import hashlib, json, sys
shipped = {}
for line in open(sys.argv[1], encoding="utf-8", errors="surrogateescape"):
    digest, _, path = line.rstrip("\n").partition("  ")
    shipped[path] = digest
now = [p for p in sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0") if p]
out = set(p for p in shipped if p not in set(now))                      # removed
for p in now:
    with open(p, "rb") as f:
        if shipped.get(p) != hashlib.sha256(f.read()).hexdigest():     # changed or added
            out.add(p)
print(json.dumps(sorted(p[2:] if p.startswith("./") else p for p in out)))
' "$MANIFEST")
  local patches=()
  [ -d "$PATCHES_DIR" ] && mapfile -t patches < <(find "$PATCHES_DIR" -maxdepth 1 -type f -name '*.patch' | LC_ALL=C sort)
  export NVBUILD_PATCHES_JSON
  NVBUILD_PATCHES_JSON=$(patch_records "${patches[@]}")
}

# ==== TensorFlow trees: which way a tree builds ============================================
# Up to 2.15: configure.py against this image's CUDA, then build_pip_package. From 2.18:
# hermetic CUDA (Bazel downloads CUDA, cuDNN and NCCL, or takes LOCAL_*_PATH) and the wheel
# target. 2.16 and 2.17 sit between (hermetic Python with the local CUDA toolkit; 2.17 has
# no build_pip_package): refused, as is a tree whose version cannot be read.
TF_WAY=""      # configure | hermetic
BAZEL=""       # the hermetic way's bazel (or bazelisk); the configure way calls `bazel`
tf_tree_version() {  # tf_tree_version DIR: MAJOR.MINOR the TensorFlow tree declares, or nothing
  local d=$1 f v="" major minor
  [ -f "$d/tensorflow/tf_version.bzl" ] \
    && v=$(sed -n 's/^TF_VERSION *= *"\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' "$d/tensorflow/tf_version.bzl" | head -n1)
  for f in "$d/tensorflow/core/public/release_version.h" "$d/tensorflow/core/public/version.h"; do
    [ -z "$v" ] && [ -f "$f" ] || continue
    major=$(sed -n 's/^#define TF_MAJOR_VERSION  *\([0-9][0-9]*\).*/\1/p' "$f" | head -n1)
    minor=$(sed -n 's/^#define TF_MINOR_VERSION  *\([0-9][0-9]*\).*/\1/p' "$f" | head -n1)
    [ -n "$major" ] && [ -n "$minor" ] && v=$major.$minor
  done
  f=$d/tensorflow/tools/pip_package/setup.py
  [ -z "$v" ] && [ -f "$f" ] && v=$(sed -n "s/^_VERSION *= *['\"]\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p" "$f" | head -n1)
  echo "$v"
}

tf_way() {  # tf_way: TF_WAY for the tree at $SRC, or a one-line failure
  local v major minor
  v=$(tf_tree_version "$SRC")
  [ -n "$v" ] || fail configure "cannot tell which TensorFlow $SRC is (no version in tensorflow/tf_version.bzl, tensorflow/core/public/version.h or tensorflow/tools/pip_package/setup.py)"
  major=${v%%.*} minor=${v#*.}
  if [ "$major" -lt 2 ] || { [ "$major" = 2 ] && [ "$minor" -le 15 ]; }; then
    TF_WAY=configure
  elif [ "$major" = 2 ] && [ "$minor" -le 17 ]; then
    fail configure "TensorFlow $v tree: 2.16 and 2.17 build with hermetic Python but this image's CUDA toolkit, which neither of nvbuild.sh's ways does (up to 2.15: configure.py and build_pip_package; 2.18 on: hermetic CUDA and the wheel target)"
  else
    TF_WAY=hermetic
  fi
  TF_TREE_VERSION=$v
}

redist_pick() {  # redist_pick DICT VERSION FILE...: the version to ask hermetic CUDA for, then why
  # VERSION as the tree's hermetic rules list it (DICT in their cuda_redist_versions.bzl): the
  # newest listed patch of its MAJOR.MINOR, else the newest listed of its major not newer
  # than it (CUDA 12 and cuDNN 9 run code built against an older minor). Without a list in
  # the tree (rules kept outside it, e.g. rules_ml_toolchain), VERSION with .0 when it has
  # no patch; bazel checks it.
  "$PYTHON" - "$@" <<'PY'
import re, sys
name, want, files = sys.argv[1], sys.argv[2], sys.argv[3:]
key = lambda v: tuple(int(x) for x in v.split("."))
listed = set()
for f in files:
    m = re.search(r"^%s\s*=\s*\{(.*?)^\}" % re.escape(name), open(f, errors="replace").read(), re.S | re.M)
    if m:
        listed |= set(re.findall(r'^\s*"(\d+(?:\.\d+)+)"\s*:', m.group(1), re.M))
w = key(want)
exact = want if len(w) > 2 else want + ".0"
if not listed:
    print(exact); print("the tree lists no hermetic versions: bazel checks it")
elif want in listed:
    print(want); print("listed by the tree")
else:
    same = [v for v in listed if key(v)[:2] == w[:2]]
    older = [v for v in listed if key(v)[0] == w[0] and key(v) <= w + (1 << 30,) * (len(w) == 2)]
    pick = max(same or older, key=key, default=None)
    if pick:
        print(pick); print(f"{want} is not listed by the tree; {pick} is its newest of {'that release' if same else 'that major'}")
    else:
        print(exact); print(f"not listed by the tree (nor any of its major): bazel will refuse it")
PY
}

hermetic_capabilities() {  # "6.0,8.6,9.0" -> sm_60,sm_86,compute_90: SASS for each, PTX for the newest
  local out="" cc newest
  newest=$(tr , '\n' <<< "$1" | sort -t. -k1,1n -k2,2n | tail -n1)
  while IFS= read -r cc; do
    [ -n "$cc" ] || continue
    if [ "$cc" = "$newest" ]; then out+=",compute_${cc/./}"; else out+=",sm_${cc/./}"; fi
  done < <(tr , '\n' <<< "$1" | sort -t. -k1,1n -k2,2n -u)
  echo "${out#,}"
}

HERMETIC_FLAGS=()   # the hermetic way's --repo_env flags, in order
hermetic_settings() {  # hermetic_settings FLAGS_FILE_FLAGS...: choose, export and log the hermetic build's settings
  local flag name value why note sub py cuda cudnn_h major minor patch redist=() set_by_file=" "
  for flag in "$@"; do  # --repo_env=NAME=... in nvbuildopts: the flags file's choice stands
    case "$flag" in --repo_env=*=*) name=${flag#--repo_env=}; set_by_file+="${name%%=*} " ;; esac
  done
  BAZEL=$(command -v bazel || command -v bazelisk) \
    || fail configure "no bazel (nor bazelisk) on PATH: TensorFlow $TF_TREE_VERSION builds with Bazel $(cat "$SRC/.bazelversion" 2>/dev/null || echo '(see .bazelversion)')"
  HERMETIC_FLAGS=()
  repo_env() {  # repo_env NAME VALUE WHY: one --repo_env, exported for configure.py too
    case "$set_by_file" in *" $1 "*) log "hermetic: $1 from $FLAGS_FILE (not $2)"; return ;; esac
    export "$1=$2"
    HERMETIC_FLAGS+=("--repo_env=$1=$2")
    log "hermetic: $1=$2 ($3)"
  }
  mapfile -t redist < <(find "$SRC/third_party" -name cuda_redist_versions.bzl -path '*hermetic*' 2>/dev/null | LC_ALL=C sort)
  if [ -n "$CUDA_VER" ]; then
    export TF_CUDA_CLANG=${TF_CUDA_CLANG:-0}
    if [ -n "${HERMETIC_CUDA_VERSION+set}" ]; then
      [ -n "$HERMETIC_CUDA_VERSION" ] && repo_env HERMETIC_CUDA_VERSION "$HERMETIC_CUDA_VERSION" "from the environment"
      [ -n "$HERMETIC_CUDA_VERSION" ] || log "hermetic: CUDA: the tree's default (HERMETIC_CUDA_VERSION is empty)"
    else
      # The newest CUDA this image compiles with (a newer ptxas of nvcc's major assembles
      # the capabilities nvcc lacks), so every resolved capability is one it compiles; the
      # patch release is the base's CUDA_VERSION where that names this release.
      cuda=$CUDA_VER why="nvcc $CUDA_VER"
      if [ -n "${PTXAS_VER:-}" ] && [ "$(printf '%s\n' "$CUDA_VER" "$PTXAS_VER" | sort -V | tail -n1)" = "$PTXAS_VER" ]; then
        cuda=$PTXAS_VER why="ptxas $PTXAS_VER beside nvcc $CUDA_VER"
      fi
      case "${CUDA_VERSION:-}" in "$cuda".[0-9]*) cuda=$CUDA_VERSION why+=", CUDA_VERSION=$CUDA_VERSION" ;; esac
      { read -r value; read -r note; } < <(redist_pick CUDA_REDIST_JSON_DICT "$cuda" "${redist[@]}")
      repo_env HERMETIC_CUDA_VERSION "$value" "$why; $note"
    fi
    if [ -n "${HERMETIC_CUDNN_VERSION+set}" ]; then
      [ -n "$HERMETIC_CUDNN_VERSION" ] && repo_env HERMETIC_CUDNN_VERSION "$HERMETIC_CUDNN_VERSION" "from the environment"
      [ -n "$HERMETIC_CUDNN_VERSION" ] || log "hermetic: cuDNN: the tree's default (HERMETIC_CUDNN_VERSION is empty)"
    elif cudnn_h=$(header_path cudnn_version.h) && [ -n "$cudnn_h" ]; then
      major=$(sed -n 's/^#define CUDNN_MAJOR *\([0-9]*\).*/\1/p' "$cudnn_h" | head -n1)
      minor=$(sed -n 's/^#define CUDNN_MINOR *\([0-9]*\).*/\1/p' "$cudnn_h" | head -n1)
      patch=$(sed -n 's/^#define CUDNN_PATCHLEVEL *\([0-9]*\).*/\1/p' "$cudnn_h" | head -n1)
      { read -r value; read -r note; } < <(redist_pick CUDNN_REDIST_JSON_DICT "$major.$minor.${patch:-0}" "${redist[@]}")
      repo_env HERMETIC_CUDNN_VERSION "$value" "$cudnn_h says $major.$minor.${patch:-0}; $note"
    else
      log "hermetic: cuDNN: the tree's default (no cudnn_version.h in this image)"
    fi
    [ -n "${HERMETIC_CUDA_COMPUTE_CAPABILITIES:-}" ] && [ "$HERMETIC_CUDA_COMPUTE_CAPABILITIES" != "$(hermetic_capabilities "$SM")" ] \
      && log "warning: HERMETIC_CUDA_COMPUTE_CAPABILITIES=$HERMETIC_CUDA_COMPUTE_CAPABILITIES from the environment is replaced: capabilities come from --sm"
    repo_env HERMETIC_CUDA_COMPUTE_CAPABILITIES "$(hermetic_capabilities "$SM")" "--sm $SM: SASS for each, PTX for the newest"
    for name in LOCAL_CUDA_PATH LOCAL_CUDNN_PATH LOCAL_NCCL_PATH; do
      value=${!name:-}
      [ -n "$value" ] || continue
      # the layout NVIDIA's redistribution archives unpack to (XLA's hermetic_cuda.md)
      for sub in include lib $([ "$name" = LOCAL_CUDA_PATH ] && echo bin nvvm); do
        [ -d "$value/$sub" ] || fail configure "$name=$value has no $sub/ (expected the layout NVIDIA's redistributions unpack to: include/ and lib/, and for CUDA bin/ and nvvm/ too)"
      done
      repo_env "$name" "$value" "from the environment: no download"
    done
  else
    export TF_NEED_CLANG=${TF_NEED_CLANG:-0}
    log "hermetic: no nvcc in this image: a CPU-only wheel"
  fi
  py=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || fail configure "$PYTHON does not run"
  [ "${HERMETIC_PYTHON_VERSION:-$py}" = "$py" ] \
    || log "warning: HERMETIC_PYTHON_VERSION=$HERMETIC_PYTHON_VERSION from the environment is replaced by $py: the wheel is installed into $PYTHON"
  repo_env HERMETIC_PYTHON_VERSION "$py" "$PYTHON"
  repo_env WHEEL_NAME tensorflow "the wheel's name"
  unset -f repo_env
}

hermetic_build() {  # hermetic_build FLAGS_FILE_FLAGS...: bazel build of the wheel target; the wheel into WHEEL_DIR
  local flags=() file_repo_env=() flag target=//tensorflow/tools/pip_package:wheel wheel
  # The CUDA configs are this script's, and every --repo_env comes after them: a --config
  # expands where it stands, so a later --repo_env overrides the .bazelrc's build:cuda ones.
  for flag in "$@"; do
    case "$flag" in
      --config=cuda|--config=cuda_wheel) ;;
      --repo_env=*) file_repo_env+=("$flag") ;;
      *) flags+=("$flag") ;;
    esac
  done
  [ -n "$API" ] && flags+=("--config=$API")
  [ -n "$CUDA_VER" ] && flags+=(--config=cuda --config=cuda_wheel)
  flags+=("${HERMETIC_FLAGS[@]}" "${file_repo_env[@]}" "${FETCH_FLAGS[@]}")
  # The mounted local cache (as for ccache) keeps bazel's downloads between builds on this
  # machine: hermetic CUDA alone is gigabytes.
  if [ -z "$REPOSITORY_CACHE" ] && [ -n "$LOCAL_CCACHE" ]; then
    flags+=("--repository_cache=$LOCAL_CACHE/bazel-repository-cache")
  fi
  if [ -n "$CACHE_URL" ]; then
    flags+=("--remote_cache=$CACHE_URL" "--remote_local_fallback" "--remote_timeout=30")
  fi
  if [ -n "$REMOTE_EXECUTOR" ]; then
    flags+=("--remote_executor=$REMOTE_EXECUTOR")
    [ -n "$REMOTE_INSTANCE" ] && flags+=("--remote_instance_name=$REMOTE_INSTANCE")
  fi
  log "compile phase: $(basename "$BAZEL") build ${flags[*]} $target"
  "$BAZEL" build "${flags[@]}" "$target" || fail compile "bazel build exited $?"
  took compile "$compile_start"
  log "package phase"
  wheel=$(find -L bazel-bin/tensorflow/tools/pip_package/wheel_house -maxdepth 1 -name '*.whl' -printf '%T@ %p\n' 2>/dev/null \
          | sort -n | tail -n1 | cut -d' ' -f2-)
  [ -n "$wheel" ] || fail package "$target made no wheel in bazel-bin/tensorflow/tools/pip_package/wheel_house/"
  cp "$wheel" "$WHEEL_DIR/" || fail package "cannot copy $wheel to $WHEEL_DIR"
  log "package phase: $(basename "$wheel")"
}

# ==== the framework: the TensorFlow extension, or a TensorFlow checkout ====================
build_framework() {
  local driver
  if [ -f "$SRC/configure.py" ] && [ -d "$SRC/tensorflow" ]; then
    driver=tensorflow
  elif { [ -f "$SRC/python/tfext/__init__.py" ] || [ -f "$SRC/python/tfref/__init__.py" ]; } && [ -x "$SRC/configure" ]; then
    driver=extension
  else
    fail configure "$SRC is neither a TensorFlow tree nor the TensorFlow extension"
  fi
  DRIVER=$driver
  if [ "$driver" = tensorflow ]; then
    tf_way
    [ "$TF_WAY" = configure ] && [ -n "$REMOTE_EXECUTOR" ] \
      && fail configure "--remote-executor needs a TensorFlow 2.18+ tree (hermetic CUDA): this $TF_TREE_VERSION tree compiles against this image's CUDA"
  elif [ -n "$REPOSITORY_CACHE$REMOTE_EXECUTOR" ] || [ "${#DISTDIRS[@]}" -gt 0 ]; then
    log "warning: --repository-cache, --distdir and --remote-executor are bazel's (TensorFlow trees): not used for the extension"
  fi
  local extra_flags=() line
  if [ -r "$FLAGS_FILE" ]; then
    while read -r line; do
      case "$line" in ''|'#'*) continue ;; esac
      extra_flags+=("$line")
    done < "$FLAGS_FILE"
  fi
  log "driver: $driver${TF_WAY:+ $TF_TREE_VERSION ($TF_WAY)}; compute capabilities: ${SM:-none} (CUDA ${CUDA_VER:-none}); xla=$TF_ENABLE_XLA gcp=$TF_NEED_GCP hdfs=$TF_NEED_HDFS; python: $PYTHON"

  cd "$SRC" || fail configure "cannot enter $SRC"

  # Configuration identity: reconfigure only when it changes.
  local config_id="sm=$SM python=$PYTHON xla=$TF_ENABLE_XLA gcp=$TF_NEED_GCP hdfs=$TF_NEED_HDFS cuda=$CUDA_VER"
  config_id+=" ptxas=$PTXAS_BIN@$PTXAS_VER"
  if [ "$TF_WAY" = configure ] && [ "$SM_NVCC" != "$SM" ]; then
    log "TensorFlow $TF_TREE_VERSION's configure.py compiles with nvcc $CUDA_VER alone: $SM_NVCC (the rest by PTX JIT)"
    export TF_CUDA_COMPUTE_CAPABILITIES=$SM_NVCC
  fi
  if [ "$TF_WAY" = hermetic ]; then
    hermetic_settings "${extra_flags[@]}"
    config_id+=" way=hermetic ${HERMETIC_FLAGS[*]}"
  fi

  if [ "$CLEAN_BEFORE" = 1 ]; then
    log "--clean: wiping build state and configuration"
    clean_state
  fi

  # --- configure ------------------------------------------------------------------------
  local rc
  if [ ! -f .tf_configure.bazelrc ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$config_id" ]; then
    log "configure phase"
    if [ "$driver" = tensorflow ]; then
      # `yes` dies of SIGPIPE when configure stops reading: only configure's status counts.
      yes "" | "$PYTHON" configure.py >/dev/null
      rc=${PIPESTATUS[1]}
      [ "$rc" = 0 ] || fail configure "configure.py exited $rc"
    else
      ./configure
      rc=$?
      [ "$rc" = 0 ] || fail configure "./configure exited $rc"
    fi
    echo "$config_id" > "$STAMP"
  else
    log "configure phase: configuration unchanged, not reconfiguring"
  fi
  [ "$CONFIGONLY" = 1 ] && { log "--configonly: done"; exit 0; }

  record_source
  check_cache

  # --- compile, package, install ----------------------------------------------------------
  rm -rf "$WHEEL_DIR"
  mkdir -p "$WHEEL_DIR"
  local start compile_start
  start=$(date +%s)
  compile_start=$(now)
  if [ "$TF_WAY" = hermetic ]; then
    hermetic_build "${extra_flags[@]}"
  elif [ "$driver" = tensorflow ]; then
    local bazel_flags=("${extra_flags[@]}")
    [ -n "$API" ] && bazel_flags+=("--config=$API")
    if [ -n "$CACHE_URL" ]; then
      bazel_flags+=("--remote_cache=$CACHE_URL" "--remote_local_fallback" "--remote_timeout=30")
    fi
    bazel_flags+=("${FETCH_FLAGS[@]}")
    log "compile phase: bazel build ${bazel_flags[*]} //tensorflow/tools/pip_package:build_pip_package"
    bazel build "${bazel_flags[@]}" //tensorflow/tools/pip_package:build_pip_package \
      || fail compile "bazel build exited $?"
    took compile "$compile_start"
    log "package phase"
    bazel-bin/tensorflow/tools/pip_package/build_pip_package "$WHEEL_DIR" --gpu --project_name tensorflow \
      || fail package "build_pip_package exited $?"
  else
    local make_vars=(-j"$(nproc)") cache_log="" env_vars=()
    # Every compile goes through ccache (the shared cache with --cache, else a local one),
    # so the units really compiled are listed with and without a compile cache.
    if [ -n "$CACHE_URL" ] && ! have_http_ccache; then
      log "warning: --cache needs ccache with HTTP storage (4.4+), which this image lacks; compiling without a cache"
      CACHE_URL=""
    fi
    if command -v ccache >/dev/null 2>&1; then
      cache_log=$WORK/ccache-extension.log
      ccache_vars "$SRC" "$cache_log" /tmp/ccache
      env_vars=("${CCACHE_VARS[@]}")
      make_vars+=(COMPILER_LAUNCHER=ccache)
    else
      log "warning: ccache is not installed: the extension's compiled units are not listed"
    fi
    log "compile phase"
    env "${env_vars[@]}" make "${make_vars[@]}" all
    rc=$?
    [ "$rc" = 0 ] || fail compile "make exited $rc"
    took compile "$compile_start"
    [ -n "$cache_log" ] && [ -f "$cache_log" ] && units_report "$cache_log"
    log "package phase"
    make -s WHEEL_DIR="$WHEEL_DIR" wheel || fail package "make wheel exited $?"
  fi
  log "compiled and packaged in $(( $(date +%s) - start ))s"

  log "install phase"
  local install_start
  install_start=$(now)
  install_built install "$WHEEL_DIR"/*.whl
  took install "$install_start"

  if [ "$CLEAN_AFTER" = 1 ]; then
    cd "$SRC" && clean_state
    rm -rf "$WHEEL_DIR" /tmp/ccache
  fi
  cd / || exit 1
}

clean_state() {
  if [ "$DRIVER" = tensorflow ]; then
    "${BAZEL:-bazel}" clean --expunge >/dev/null 2>&1 || true
  else
    make -s clean >/dev/null 2>&1 || true
  fi
  rm -f .tf_configure.bazelrc config.mk "$STAMP"
}

# ==== what a compiled component compiles against ============================================
tensorflow_identity() {  # the installed TensorFlow a component compiles against: name, version, framework library
  "$PYTHON" - <<'PY'
import glob, hashlib, importlib.util, os
from importlib import metadata
for dist in ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tf-nightly", "tf-nightly-gpu"):
    try:
        print(f"{dist}=={metadata.version(dist)}")
        break
    except metadata.PackageNotFoundError:
        pass
spec = importlib.util.find_spec("tensorflow")
if spec and spec.submodule_search_locations:
    root = list(spec.submodule_search_locations)[0]
    for lib in sorted(glob.glob(os.path.join(root, "libtensorflow_framework.so*"))):
        if not os.path.islink(lib):
            h = hashlib.sha256()
            with open(lib, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            print(os.path.basename(lib), h.hexdigest())
PY
}

# ==== build info: what the image holds now, as the image itself reports it ==================
write_build_info() {
  local phase_start
  phase_start=$(now)
  cd / || exit 1
  # what a component tells its report script (report_env_NAME, where its step defines one)
  for name in "${COMPONENT_STEPS[@]}"; do
    if declare -F "report_env_$name" >/dev/null; then "report_env_$name"; fi
  done
  # The image's own report (builder/in_image/image_report.py, shipped next to this script) is the
  # one writer of build-info.json: its schema lives in builder/core/contract.py, nowhere else.
  [ -f "$REPORT_SCRIPT" ] || fail report "no $REPORT_SCRIPT (the image's report writes build-info.json; NVBUILD_REPORT_SCRIPT names another)"
  # It reads the requested capabilities from TF_CUDA_COMPUTE_CAPABILITIES: the resolved
  # list, or none when there is no CUDA compiler.
  TF_CPP_MIN_LOG_LEVEL=3 TF_CUDA_COMPUTE_CAPABILITIES=$([ -n "$CUDA_VER" ] && echo "$SM") \
    "$PYTHON" "$REPORT_SCRIPT" > "$BUILD_INFO.tmp"
  local rc=$?
  [ "$rc" = 0 ] || { rm -f "$BUILD_INFO.tmp"; fail report "$REPORT_SCRIPT exited $rc"; }
  mv "$BUILD_INFO.tmp" "$BUILD_INFO"
  took report "$phase_start"
  log "wrote $BUILD_INFO"
}

DRIVER=""
[ "$BUILD_FRAMEWORK" = 1 ] && build_framework
for name in "${BUILD_COMPONENTS[@]}"; do "build_$name"; done
write_build_info
exit 0
