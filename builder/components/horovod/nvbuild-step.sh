# nvbuild.sh's step for Horovod (sourced by nvbuild.sh from /opt/tensorflow/components/
# horovod/; `nvbuild.sh --only horovod` runs it alone).
#
# Horovod: when /opt/tensorflow/horovod-source/setup.py exists (the pristine PyPI sdist),
# it is copied to a temporary build directory, every /opt/tensorflow/patches/horovod/*.patch
# is applied in name order (patch -p1 --forward --batch), and its wheel is built there
# (setup.py bdist_wheel, no -g) and installed with pip (no dependencies, no index) with
# TensorFlow, MPI and Gloo, NCCL GPU
# operations (NCCL from the release's nvidia-nccl wheel, linked shared), the same compute
# capabilities as the framework (SASS for each, PTX for the newest nvcc knows; those only a
# newer ptxas knows, e.g. 10.0 and 12.0 beside nvcc 12.4, are assembled by it from that
# PTX into the same fatbin, as the extension does) and portable x86 flags (-mf16c -mavx
# -mfma, never -march=native); without nvcc it is built CPU-only. Installed
# shared objects are stripped of debug info. A stamp (/opt/tensorflow/.horovod-build-id)
# holds a hash of the source, its patches, the capabilities, the installed TensorFlow and
# the HOROVOD_* settings: when it matches and `import horovod.tensorflow` works, Horovod is
# not rebuilt ("horovod: up to date, not rebuilt"). Every Horovod compile goes through
# ccache (the shared cache with --cache, else an empty local one), so the units it really
# compiled are always listed.
#
# NVBUILD_HOROVOD=0 skips it (a tree without Horovod).
# shellcheck shell=bash
HVD_SRC=${NVBUILD_HOROVOD_SOURCE:-$HERE/horovod-source}
HVD_PATCHES_DIR=${NVBUILD_HOROVOD_PATCHES:-$PATCHES_DIR/horovod}
HVD_STAMP=${NVBUILD_HOROVOD_STAMP:-$HERE/.horovod-build-id}
# Bump when the way Horovod is built changes, so every image rebuilds it once.
HVD_RECIPE=4

build_horovod() {
  if [ "${NVBUILD_HOROVOD:-1}" = 0 ]; then
    log "horovod: NVBUILD_HOROVOD=0, not built"
    return
  fi
  if [ ! -f "$HVD_SRC/setup.py" ]; then
    [ "$ONLY" = horovod ] && fail "horovod patch" "no Horovod source at $HVD_SRC (setup.py missing)"
    log "horovod: no source at $HVD_SRC, not built"
    return
  fi
  local patch_files=()
  mapfile -t patch_files < <(patch_files "$HVD_PATCHES_DIR")

  # --- what this build is: settings, NCCL, and the identity the stamp holds -------------
  local cuda_home="" nccl_h="" nccl_root="" targets="CPU only (no nvcc)" assemble="" ptx_arch=""
  local settings=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
                  HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_BUILD_ARCH_FLAGS="-mf16c -mavx -mfma")
  if [ -n "$CUDA_VER" ]; then
    targets="compute capabilities $SM_NVCC"
    if [ -x /usr/local/cuda/bin/nvcc ]; then cuda_home=/usr/local/cuda
    else cuda_home=$(dirname "$(dirname "$(readlink -f "$NVCC_BIN")")"); fi
    nccl_h=$(header_path nccl.h)
    [ -n "$nccl_h" ] || fail "horovod compile" "CUDA $CUDA_VER but no nccl.h (install the release's nvidia-nccl wheel, or set NVBUILD_HOROVOD=0)"
    nccl_root=$(dirname "$(dirname "$nccl_h")")
    settings+=(HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_CUDA_HOME="$cuda_home" HOROVOD_NCCL_LINK=SHARED
               HOROVOD_BUILD_CUDA_CC_LIST="$(echo "$SM_NVCC" | tr -d .)")
    if [ -n "$PTXAS_BIN" ]; then
      assemble=$("$PYTHON" "$POLICY" assemble "$SM" "$CUDA_VER" --ptxas "$PTXAS_VER") \
        || fail configure "compute capabilities '$SM' rejected"
      ptx_arch=$(echo "$SM_NVCC" | tr , '\n' | tr -d . | sort -n | tail -n1)
      [ -n "$assemble" ] && targets+=" (sm_${assemble// /, sm_} by ptxas $PTXAS_VER from compute_$ptx_arch)"
    fi
  fi
  local inherited=()  # HOROVOD_* the environment already sets (and this script does not)
  mapfile -t inherited < <(env | LC_ALL=C sort | grep '^HOROVOD_' | grep -v -E \
    '^HOROVOD_(WITH_TENSORFLOW|WITHOUT_PYTORCH|WITHOUT_MXNET|WITH_MPI|WITH_GLOO|BUILD_ARCH_FLAGS|GPU_OPERATIONS|CUDA_HOME|NCCL_LINK|NCCL_HOME|NCCL_INCLUDE|NCCL_LIB|BUILD_CUDA_CC_LIST)=')
  local build_id patches_json
  patches_json=$(patch_records "${patch_files[@]}")
  build_id=$({
    echo "recipe=$HVD_RECIPE python=$PYTHON cuda=${CUDA_VER:-none} sm=$targets ptxas=$PTXAS_BIN@$PTXAS_VER"
    (cd "$HVD_SRC" && find . -type f ! -path './build/*' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    echo "patches=$patches_json"
    tensorflow_identity
    printf '%s\n' "${settings[@]}" "${inherited[@]}"
    [ -n "$nccl_h" ] && echo "nccl=$nccl_root $(sha256sum < "$nccl_h")"
    g++ --version 2>/dev/null | head -n1
    command -v mpicxx >/dev/null && mpicxx --showme:version 2>/dev/null
  } | sha256sum | cut -d' ' -f1)

  if [ "$CLEAN_BEFORE" = 1 ]; then
    rm -f "$HVD_STAMP"
  elif [ "$(head -n1 "$HVD_STAMP" 2>/dev/null)" = "$build_id" ] \
       && (cd / && TF_CPP_MIN_LOG_LEVEL=3 "$PYTHON" -c 'import horovod.tensorflow' >/dev/null 2>&1); then
    log "horovod: up to date, not rebuilt"
    export NVBUILD_HOROVOD_PATCHES_JSON
    NVBUILD_HOROVOD_PATCHES_JSON=$(sed -n 2p "$HVD_STAMP")
    return
  fi
  local version
  version=$(sed -n 's/^Version: *//p' "$HVD_SRC/PKG-INFO" 2>/dev/null | head -n1)
  log "horovod ${version:-?}: building for $targets"

  # --- patch: a pristine copy, then every patch in name order ----------------------------
  local hvd_work=$WORK/horovod phase_start p out
  phase_start=$(now)
  mkdir -p "$hvd_work"
  cp -a "$HVD_SRC" "$hvd_work/src" || fail "horovod patch" "cannot copy $HVD_SRC"
  rm -rf "$hvd_work/src/build"
  apply_patches horovod "$hvd_work/src" "${patch_files[@]}"
  (cd "$hvd_work/src" && find . -type f | sed 's|^\./||') > "$hvd_work/sources.txt"
  took "horovod patch" "$phase_start"

  # --- compile: setup.py bdist_wheel, every C++ and nvcc compile through ccache ----------
  check_cache
  phase_start=$(now)
  local env_vars=("${settings[@]}" MAKEFLAGS="-j$(nproc)" TMPDIR="$hvd_work/tmp" TF_CPP_MIN_LOG_LEVEL=2)
  mkdir -p "$hvd_work/tmp" "$hvd_work/wheel" "$hvd_work/bin"
  if [ -n "$nccl_root" ]; then
    # The wheel has include/nccl.h and lib/libnccl.so.2 but no libnccl.so: a conventional
    # prefix of links for the link step (the library's soname, libnccl.so.2, is what the
    # built objects ask for at run time).
    local nccl_lib
    nccl_lib=$(find "$nccl_root/lib" "$nccl_root/lib64" /usr/lib/x86_64-linux-gnu -maxdepth 1 -name 'libnccl.so*' 2>/dev/null | LC_ALL=C sort | head -n1)
    [ -n "$nccl_lib" ] || fail "horovod compile" "no libnccl.so* next to $nccl_h"
    mkdir -p "$hvd_work/nccl/lib"
    ln -s "$(dirname "$nccl_h")" "$hvd_work/nccl/include"
    ln -s "$(readlink -f "$nccl_lib")" "$hvd_work/nccl/lib/libnccl.so"
    # LIBRARY_PATH makes the prefix an implicit link directory for CMake, so the library
    # gets no RUNPATH entry pointing into this temporary directory.
    env_vars+=(HOROVOD_NCCL_HOME="$hvd_work/nccl" HOROVOD_NCCL_INCLUDE="$hvd_work/nccl/include"
               HOROVOD_NCCL_LIB="$hvd_work/nccl/lib" LIBRARY_PATH="$hvd_work/nccl/lib${LIBRARY_PATH:+:$LIBRARY_PATH}")
  fi
  local cache_log="" cuda_language=0
  # Horovod 0.25 and later compile CUDA as CMake's CUDA language; before, with FindCUDA.
  grep -q 'enable_language(CUDA)' "$hvd_work/src/CMakeLists.txt" && cuda_language=1
  if command -v ccache >/dev/null 2>&1; then
    # Horovod's CMakeLists puts ccache in front of the C++ compiler when it finds one (and
    # of nvcc, with CMake's CUDA language); FindCUDA's nvcc goes through it by the nvcc
    # wrapper. The copy is a new temporary directory each build: paths are made relative
    # to the build's parent. A compiler's identity for the cache is its version output:
    # nvcc may be a two-line script (Debian's /usr/bin/nvcc), and the wrapper's path is new
    # each build.
    cache_log=$hvd_work/ccache.log
    if [ -n "$CACHE_URL" ] && ! have_http_ccache; then
      log "warning: --cache needs ccache with HTTP storage (4.4+), which this image lacks; compiling without a cache"
      CACHE_URL=""
    fi
    ccache_vars "$hvd_work" "$cache_log" "$hvd_work/ccache"
    env_vars+=("${CCACHE_VARS[@]}")
    [ "$cuda_language" = 1 ] && env_vars+=(CCACHE_COMPILERCHECK="%compiler% --version")
  else
    log "warning: ccache is not installed: Horovod compiles without a cache and its compiled units are not listed"
  fi
  if [ -n "$CUDA_VER" ]; then
    # nvcc-wrapper.sh as bin/nvcc of a directory of its own: ccache in front (FindCUDA) and
    # the capabilities only the newer ptxas assembles. CMake's CUDA language takes the
    # compiler from HOROVOD_CUDA_HOME/bin/nvcc (and the toolkit from what nvcc reports).
    mkdir -p "$hvd_work/cuda/bin"
    cp "$HERE/components/horovod/nvcc-wrapper.sh" "$hvd_work/cuda/bin/nvcc" && chmod 755 "$hvd_work/cuda/bin/nvcc" \
      || fail "horovod compile" "cannot place the nvcc wrapper"
    env_vars+=(NVBUILD_NVCC_REAL="$cuda_home/bin/nvcc" NVBUILD_NVCC_ASSEMBLE="$assemble"
               NVBUILD_NVCC_PTX_ARCH="$ptx_arch" NVBUILD_NVCC_PTXAS="$PTXAS_BIN")
    if [ "$cuda_language" = 1 ]; then
      env_vars+=(HOROVOD_CUDA_HOME="$hvd_work/cuda")
    else
      env_vars+=(CUDA_NVCC_EXECUTABLE="$hvd_work/cuda/bin/nvcc")
      [ -n "$cache_log" ] && env_vars+=(NVBUILD_NVCC_CCACHE=1)
    fi
  fi
  # Horovod's setup.py always configures RelWithDebInfo (-O3 -g): the debug info is
  # stripped at install, so compiling, caching, linking and zipping it is waste (it is 59
  # of mpi_lib's 64 MB). A cmake wrapper configures the same flags without -g.
  local real_cmake
  real_cmake=$(command -v "${HOROVOD_CMAKE:-cmake}") || fail "horovod compile" "no cmake"
  cat > "$hvd_work/bin/cmake" <<WRAP
#!/bin/sh
# Configure runs (not --build): RelWithDebInfo's flags without -g (Horovod turns -O2 into -O3).
case "\$1" in
  --build|-E|--version) exec "$real_cmake" "\$@" ;;
esac
exec "$real_cmake" "\$@" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"
WRAP
  chmod 755 "$hvd_work/bin/cmake"
  env_vars+=(HOROVOD_CMAKE="$hvd_work/bin/cmake")
  log "horovod compile phase"
  # shellcheck disable=SC2046
  # setup.py straight in the patched copy: `pip wheel` would copy the tree again, run
  # egg_info and fill its wheel cache first (5 of a 24 s rebuild with nothing changed).
  (cd "$hvd_work/src" && env "${env_vars[@]}" "$PYTHON" setup.py bdist_wheel -d "$hvd_work/wheel") \
    > "$hvd_work/build.log" 2>&1
  local rc=$?
  if [ "$rc" != 0 ]; then
    grep -E -B2 -A6 '(error|Error|ERROR)[: ]' "$hvd_work/build.log" | head -n 80 >&2
    echo "--- last lines of the Horovod build log ---" >&2
    tail -n 40 "$hvd_work/build.log" >&2
    fail "horovod compile" "setup.py bdist_wheel exited $rc"
  fi
  took "horovod compile" "$phase_start"
  [ -n "$cache_log" ] && [ -f "$cache_log" ] && units_report "$cache_log" "$hvd_work/sources.txt" horovod/

  # --- install: the wheel, stripped, then it must import ---------------------------------
  phase_start=$(now)
  log "horovod install phase"
  local wheel
  wheel=$(find "$hvd_work/wheel" -maxdepth 1 -name 'horovod-*.whl' | head -n1)
  [ -n "$wheel" ] || fail "horovod install" "setup.py bdist_wheel made no horovod wheel"
  install_built "horovod install" "$wheel"
  local pkg
  pkg=$(cd / && "$PYTHON" -c 'import importlib.util as u; print(list(u.find_spec("horovod").submodule_search_locations)[0])') \
    || fail "horovod install" "the installed horovod package is not found"
  find "$pkg" -name '*.so' -type f -exec strip --strip-debug {} + || fail "horovod install" "strip failed"
  out=$(cd / && TF_CPP_MIN_LOG_LEVEL=3 "$PYTHON" -c 'import horovod.tensorflow' 2>&1) \
    || { printf '%s\n' "$out" | tail -n 20 >&2; fail "horovod install" "the installed horovod.tensorflow does not import"; }
  printf '%s\n%s\n' "$build_id" "$patches_json" > "$HVD_STAMP"
  export NVBUILD_HOROVOD_PATCHES_JSON=$patches_json
  took "horovod install" "$phase_start"
  log "horovod: installed $(basename "$wheel") ($(du -sh "$pkg" | cut -f1) in $pkg)"
  if [ "$CLEAN_AFTER" = 0 ]; then
    mkdir -p /tmp/nvbuild-horovod && rm -rf /tmp/nvbuild-horovod/build && mv "$hvd_work" /tmp/nvbuild-horovod/build \
      && log "--noclean: Horovod's build directory is /tmp/nvbuild-horovod/build"
  fi
}

report_env_horovod() {  # the patches its report records, when this run did not build it
  if [ -z "${NVBUILD_HOROVOD_PATCHES_JSON:-}" ] && [ -f "$HVD_STAMP" ]; then
    export NVBUILD_HOROVOD_PATCHES_JSON
    NVBUILD_HOROVOD_PATCHES_JSON=$(sed -n 2p "$HVD_STAMP")
  fi
}
