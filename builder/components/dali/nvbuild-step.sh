# nvbuild.sh's step for DALI's TensorFlow plugin (sourced by nvbuild.sh from
# /opt/tensorflow/components/dali/; `nvbuild.sh --only dali` runs it alone).
#
# When /opt/tensorflow/dali-tf-plugin-source/setup.py exists (the plugin's pristine PyPI
# sdist; DALI itself is a wheel), it is copied, every /opt/tensorflow/patches/dali/*.patch is
# applied in name order, and the plugin is compiled against the installed TensorFlow (its
# headers and CUDA's, no nvcc) into a wheel that pip installs (no dependencies, no index).
# A stamp (/opt/tensorflow/.dali-tf-plugin-build-id: the source, patches, TensorFlow, g++)
# skips an up-to-date rebuild ("dali: up to date, not rebuilt").
# shellcheck shell=bash
DALI_SRC=${NVBUILD_DALI_SOURCE:-$HERE/dali-tf-plugin-source}
DALI_PATCHES_DIR=${NVBUILD_DALI_PATCHES:-$PATCHES_DIR/dali}
DALI_STAMP=$HERE/.dali-tf-plugin-build-id

build_dali() {
  if [ ! -f "$DALI_SRC/setup.py" ]; then
    [ "$ONLY" = dali ] && fail "dali patch" "no DALI plugin source at $DALI_SRC (setup.py missing)"
    return
  fi
  local patch_files=() p out phase_start build_id patches_json cuda_home="" work=$WORK/dali
  mapfile -t patch_files < <(patch_files "$DALI_PATCHES_DIR")
  patches_json=$(patch_records "${patch_files[@]}")
  # CUDA's headers (cuda_runtime_api.h and crt/): the toolkit's, else the copy TensorFlow's wheel ships.
  for p in /usr/local/cuda "$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')/tensorflow/include/third_party/gpus/cuda"; do
    if [ -f "$p/include/cuda_runtime_api.h" ] && [ -d "$p/include/crt" ]; then cuda_home=$p; break; fi
  done
  [ -n "$cuda_home" ] || fail "dali compile" "no CUDA headers (cuda_runtime_api.h and crt/) in /usr/local/cuda/include or TensorFlow's wheel"
  build_id=$({
    echo "python=$PYTHON cuda_home=$cuda_home"
    (cd "$DALI_SRC" && find . -type f ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    echo "patches=$patches_json"
    tensorflow_identity
    "$PYTHON" -c 'import importlib.metadata as m; print([d.metadata["Name"] + "==" + d.version for d in m.distributions() if d.metadata["Name"].startswith("nvidia-dali-cuda")])'
    g++ --version 2>/dev/null | head -n1
  } | sha256sum | cut -d' ' -f1)
  if [ "$CLEAN_BEFORE" = 0 ] && [ -f "$DALI_STAMP" ] && [ "$(head -n1 "$DALI_STAMP")" = "$build_id" ] \
     && (cd / && TF_CPP_MIN_LOG_LEVEL=3 "$PYTHON" -c 'import nvidia.dali.plugin.tf' >/dev/null 2>&1); then
    log "dali: up to date, not rebuilt"
    return
  fi
  log "dali: building $(sed -n 's/^Version: *//p' "$DALI_SRC/PKG-INFO" 2>/dev/null | head -n1) against $(tensorflow_identity | head -n1) (CUDA headers: $cuda_home)"
  phase_start=$(now)
  mkdir -p "$work/wheel"
  cp -a "$DALI_SRC" "$work/src" || fail "dali patch" "cannot copy $DALI_SRC"
  apply_patches dali "$work/src" "${patch_files[@]}"
  took "dali patch" "$phase_start"
  phase_start=$(now)
  log "dali compile phase"
  # No build isolation: the plugin compiles against the TensorFlow installed here.
  (cd "$work/src" && PIP_CONSTRAINT= CUDA_HOME=$cuda_home TF_CPP_MIN_LOG_LEVEL=2 \
     "$PYTHON" -m pip wheel -q --no-deps --no-build-isolation --no-index --no-cache-dir -w "$work/wheel" .) \
    > "$work/build.log" 2>&1
  local rc=$?
  if [ "$rc" != 0 ]; then
    tail -n 40 "$work/build.log" >&2
    fail "dali compile" "pip wheel exited $rc"
  fi
  took "dali compile" "$phase_start"
  phase_start=$(now)
  local wheel
  wheel=$(find "$work/wheel" -maxdepth 1 -name 'nvidia_dali_tf_plugin*.whl' | head -n1)
  [ -n "$wheel" ] || fail "dali install" "the build made no plugin wheel"
  install_built "dali install" "$wheel"
  out=$(cd / && TF_CPP_MIN_LOG_LEVEL=3 "$PYTHON" -c 'import nvidia.dali.plugin.tf' 2>&1) \
    || { printf '%s\n' "$out" | tail -n 20 >&2; fail "dali install" "the installed nvidia.dali.plugin.tf does not import"; }
  printf '%s\n%s\n' "$build_id" "$patches_json" > "$DALI_STAMP"
  took "dali install" "$phase_start"
  log "dali: installed $(basename "$wheel")"
}
