#!/usr/bin/env bash
# nvbuild.sh: compile and install the framework from /opt/tensorflow/tensorflow-source.
#
# The single source of truth for building the framework: the release image runs it and
# so does every derived image (patch-and-rebuild), so both build the same way. Extra
# build flags come from the flags file next to this script (nvbuildopts), one per line.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=${NVBUILD_SOURCE:-$HERE/tensorflow-source}
FLAGS_FILE=${NVBUILD_FLAGS_FILE:-$HERE/nvbuildopts}
POLICY=$HERE/cuda_arch.py
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
  --configonly         configure, then stop
  --noclean            keep build state (objects, bazel output) for a faster rebuild
  --clean              wipe build state and configuration before building
  --python3.X          build for /usr/bin/python3.X instead of the default python3
  --cache URL          use a shared HTTP compile cache (ccache remote storage for the
                       reference framework, bazel --remote_cache for TensorFlow); trouble
                       with the cache falls back to a normal compile
  --v1 | --v2          TensorFlow API generation (TensorFlow trees; default from nvbuildopts)
  -h, --help           this text
Environment: TF_ENABLE_XLA, TF_NEED_GCP, TF_NEED_HDFS (0/1) decide the optional parts.
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

SM=${TF_CUDA_COMPUTE_CAPABILITIES:-all}
CONFIGONLY=0
CLEAN_AFTER=1
CLEAN_BEFORE=0
PYTHON=${PYTHON_BIN_PATH:-$(command -v python3 || true)}
CACHE_URL=${NVBUILD_CACHE_URL:-}
API=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sm) [ $# -ge 2 ] || { log "--sm needs a value"; exit 2; }; SM=$2; shift ;;
    --sm=*) SM=${1#--sm=} ;;
    --configonly) CONFIGONLY=1 ;;
    --noclean) CLEAN_AFTER=0 ;;
    --clean) CLEAN_BEFORE=1 ;;
    --python3.*)
      PYTHON=/usr/bin/python${1#--python}
      [ -x "$PYTHON" ] || { log "$1: $PYTHON is not installed in this image"; exit 2; } ;;
    --cache) [ $# -ge 2 ] || { log "--cache needs a URL"; exit 2; }; CACHE_URL=$2; shift ;;
    --cache=*) CACHE_URL=${1#--cache=} ;;
    --v1|--v2) API=${1#--} ;;
    -h|--help) usage; exit 0 ;;
    *) log "UNKNOWN OPTION $1 (see nvbuild.sh --help)"; exit 2 ;;
  esac
  shift
done

[ -d "$SRC" ] || fail configure "no source tree at $SRC"
[ -x "$PYTHON" ] || fail configure "no Python at '$PYTHON'"

# --- toolkit versions, discovered from the image rather than repeated -------------------
CUDA_VER=""
if command -v nvcc >/dev/null 2>&1; then
  CUDA_VER=$(nvcc --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p' | head -n1)
fi
header_version() {  # header_version FILE MAJOR_MACRO: the major version a header declares
  local f
  for f in "/usr/include/$1" "/usr/local/cuda/include/$1" "/usr/include/x86_64-linux-gnu/$1"; do
    [ -r "$f" ] && { sed -n "s/^#define $2 *\([0-9]*\).*/\1/p" "$f" | head -n1; return; }
  done
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
SM_ALL=${NVBUILD_SM_ALL:-$SM}
if [ -n "$CUDA_VER" ]; then
  SM=$("$PYTHON" "$POLICY" resolve "$SM" "$CUDA_VER" "$SM_ALL") || fail configure "compute capabilities '$SM' rejected"
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
export TF_CUDA_PATHS=${TF_CUDA_PATHS:-/usr,/usr/local/cuda}

extra_flags=()
if [ -r "$FLAGS_FILE" ]; then
  while read -r line; do
    case "$line" in ''|'#'*) continue ;; esac
    extra_flags+=("$line")
  done < "$FLAGS_FILE"
fi

if [ -f "$SRC/configure.py" ] && [ -d "$SRC/tensorflow" ]; then
  DRIVER=tensorflow
elif [ -f "$SRC/python/tfref/__init__.py" ] && [ -x "$SRC/configure" ]; then
  DRIVER=reference
else
  fail configure "$SRC is neither a TensorFlow tree nor the reference framework"
fi
log "driver: $DRIVER; compute capabilities: ${SM:-none} (CUDA ${CUDA_VER:-none}); xla=$TF_ENABLE_XLA gcp=$TF_NEED_GCP hdfs=$TF_NEED_HDFS; python: $PYTHON"

cd "$SRC" || fail configure "cannot enter $SRC"

# Configuration identity: reconfigure only when it changes.
config_id="sm=$SM python=$PYTHON xla=$TF_ENABLE_XLA gcp=$TF_NEED_GCP hdfs=$TF_NEED_HDFS cuda=$CUDA_VER"

clean_state() {
  if [ "$DRIVER" = tensorflow ]; then
    bazel clean --expunge >/dev/null 2>&1 || true
  else
    make -s clean >/dev/null 2>&1 || true
  fi
  rm -f .tf_configure.bazelrc config.mk "$STAMP"
}

# --- patches and source manifest: what differs from the source the image shipped -------
record_source() {
  local modified patches
  if [ ! -f "$MANIFEST" ]; then
    find . -type f ! -path './build/*' ! -path './bazel-*' ! -name '.tf_configure.bazelrc' ! -name config.mk \
      ! -name '.nvbuild-config' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum > "$MANIFEST"
  fi
  modified=$(sha256sum --quiet -c "$MANIFEST" 2>/dev/null | sed -n 's/^\.\/\(.*\): FAILED.*/\1/p')
  export NVBUILD_MODIFIED_JSON
  NVBUILD_MODIFIED_JSON=$("$PYTHON" -c 'import json,sys; print(json.dumps(sys.argv[1].split()))' "$modified")
  patches="[]"
  if [ -d "$PATCHES_DIR" ]; then
    patches=$("$PYTHON" - "$PATCHES_DIR" <<'PY'
import hashlib, json, pathlib, sys
d = pathlib.Path(sys.argv[1])
print(json.dumps([{"name": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                  for p in sorted(d.glob("*.patch"))]))
PY
)
  fi
  export NVBUILD_PATCHES_JSON=$patches
}

if [ "$CLEAN_BEFORE" = 1 ]; then
  log "--clean: wiping build state and configuration"
  clean_state
fi

# --- configure --------------------------------------------------------------------------
if [ ! -f .tf_configure.bazelrc ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$config_id" ]; then
  log "configure phase"
  if [ "$DRIVER" = tensorflow ]; then
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

# --- compile cache: a shared HTTP cache; any trouble with it means a plain compile ------
if [ -n "$CACHE_URL" ]; then
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
fi

# --- compile, package, install ------------------------------------------------------------
rm -rf "$WHEEL_DIR"
mkdir -p "$WHEEL_DIR"
start=$(date +%s)
compile_start=$(date +%s.%N)
if [ "$DRIVER" = tensorflow ]; then
  api=${API:-}
  bazel_flags=("${extra_flags[@]}")
  [ -n "$api" ] && bazel_flags+=("--config=$api")
  if [ -n "$CACHE_URL" ]; then
    bazel_flags+=("--remote_cache=$CACHE_URL" "--remote_local_fallback" "--remote_timeout=30")
  fi
  log "compile phase: bazel build ${bazel_flags[*]} //tensorflow/tools/pip_package:build_pip_package"
  bazel build "${bazel_flags[@]}" //tensorflow/tools/pip_package:build_pip_package \
    || fail compile "bazel build exited $?"
  log "package phase"
  bazel-bin/tensorflow/tools/pip_package/build_pip_package "$WHEEL_DIR" --gpu --project_name tensorflow \
    || fail package "build_pip_package exited $?"
else
  make_vars=(-j"$(nproc)")
  cache_log=""
  if [ -n "$CACHE_URL" ]; then
    if command -v ccache >/dev/null 2>&1 && ccache --version | grep -q http-storage; then
      remote=$CACHE_URL
      # A slow or full server costs a bounded wait and a miss, never a failed build.
      case "$remote" in *"|"*) ;; *) remote="$remote|connect-timeout=2000|operation-timeout=20000" ;; esac
      cache_log=$(mktemp /tmp/ccache-log.XXXXXX)
      export CCACHE_REMOTE_STORAGE=$remote CCACHE_REMOTE_ONLY=true CCACHE_DIR=/tmp/ccache
      export CCACHE_BASEDIR=$SRC CCACHE_NOHASHDIR=true CCACHE_COMPILERCHECK=content CCACHE_LOGFILE=$cache_log
      make_vars+=(COMPILER_LAUNCHER=ccache)
    else
      log "warning: --cache needs ccache with HTTP storage (4.4+), which this image lacks; compiling without a cache"
    fi
  fi
  log "compile phase"
  make "${make_vars[@]}" all
  rc=$?
  [ "$rc" = 0 ] || fail compile "make exited $rc"
  log "compile phase took $(awk -v a="$compile_start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')s"
  if [ -n "$cache_log" ]; then
    # Which translation units were really compiled, and which came from the cache.
    "$PYTHON" - "$cache_log" <<'PY' >&2
import re, sys
units, results = {}, {}
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"^\[\S+ (\d+)\s*\] (Source file|Result): (.*)$", line)
    if m and m.group(2) == "Source file":
        units[m.group(1)] = m.group(3).strip()
    elif m:
        results.setdefault(m.group(1), set()).add(m.group(3).strip())
hit = lambda r: bool(r & {"direct_cache_hit", "preprocessed_cache_hit"})
compiled = sorted(u for p, u in units.items() if not hit(results.get(p, set())))
print(f"nvbuild.sh: compile cache: {len(units) - len(compiled)} of {len(units)} translation units from the cache")
for unit in compiled:
    print(f"nvbuild.sh: compiled: {unit}")
PY
    rm -f "$cache_log"
  fi
  log "package phase"
  make -s WHEEL_DIR="$WHEEL_DIR" wheel || fail package "make wheel exited $?"
fi
log "compiled and packaged in $(( $(date +%s) - start ))s"

log "install phase"
pip_flags=(--no-deps --no-index --force-reinstall --no-cache-dir)
if compgen -G "/usr/lib/python3*/EXTERNALLY-MANAGED" >/dev/null; then pip_flags+=(--break-system-packages); fi
"$PYTHON" -m pip install -q "${pip_flags[@]}" "$WHEEL_DIR"/*.whl 2>&1 | grep -v "Running pip as the 'root' user" >&2
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || fail install "pip install exited $rc"

# Record what the framework itself reports about this build (the banner shows it).
cd / || exit 1
if [ "$DRIVER" = tensorflow ]; then
  report='import json, tensorflow as tf; i = dict(tf.sysconfig.get_build_info()); i["framework_name"] = "TensorFlow"; i["version"] = tf.__version__; print(json.dumps(i, default=str))'
else
  report='import json, tfref; i = tfref.sysconfig.get_build_info(); i["cuda_library"] = tfref.sysconfig.get_cuda_library(); print(json.dumps(i))'
fi
"$PYTHON" -c "$report" > "$BUILD_INFO.tmp" || fail install "the installed framework does not import"
mv "$BUILD_INFO.tmp" "$BUILD_INFO"
log "installed: $(cat "$BUILD_INFO")"

if [ "$CLEAN_AFTER" = 1 ]; then
  cd "$SRC" && clean_state
  rm -rf "$WHEEL_DIR" /tmp/ccache
fi
exit 0
