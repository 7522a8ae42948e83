#!/usr/bin/env bash
# Set up a fresh Debian machine for the builder, idempotently:
#   - Debian packages (Docker engine, registry, debootstrap, ...) when missing,
#   - a Docker daemon when none answers,
#   - the builder itself, editable, with its test extras.
# Usage: bash scripts/setup.sh [--no-engine]
set -euo pipefail
cd "$(dirname "$0")/.."

want_engine=1
[ "${1:-}" = "--no-engine" ] && want_engine=0

log() { echo "setup: $*" >&2; }

need_pkgs=()
if [ "$want_engine" = 1 ]; then
  command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
  [ -x /usr/bin/docker-registry ] || need_pkgs+=(docker-registry)
  command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
  [ -x /usr/sbin/nginx ] || need_pkgs+=(nginx)        # the shared compile cache server
  command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need_pkgs[*]}; run this script as root (it uses apt-get)"; exit 1
  fi
  log "installing ${need_pkgs[*]} from Debian's archive"
  apt-get update -qq
  # Install services without starting them: the builder starts nginx and the registry
  # itself, on its own ports, when it needs them.
  policy=/usr/sbin/policy-rc.d
  had_policy=0; [ -e "$policy" ] && had_policy=1
  [ "$had_policy" = 1 ] || printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod +x "$policy"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  [ "$had_policy" = 1 ] || rm -f "$policy"
fi

if [ "$want_engine" = 1 ]; then
  if ! docker info >/dev/null 2>&1; then
    log "starting dockerd (log: /var/log/dockerd.log)"
    nohup dockerd >/var/log/dockerd.log 2>&1 &
    for _ in $(seq 1 60); do
      docker info >/dev/null 2>&1 && break
      sleep 1
    done
    docker info >/dev/null 2>&1 || { log "dockerd did not come up; see /var/log/dockerd.log"; exit 1; }
  fi
  log "docker engine $(docker version --format '{{.Server.Version}}') is up"
fi

# (Re)install when the importable builder is not this checkout's: a machine can hold
# several clones, and the tests must run the code of the one they are in.
here_pkg="$(pwd)/builder"
installed_pkg=$(cd / && python3 -c "import builder, os; print(os.path.dirname(os.path.realpath(builder.__file__)))" 2>/dev/null || true)
if [ "$installed_pkg" != "$(realpath "$here_pkg")" ] || ! python3 -c "import hypothesis, testinfra, bcrypt" >/dev/null 2>&1 \
   || ! command -v builder >/dev/null 2>&1 || ! command -v hadolint >/dev/null 2>&1; then
  log "installing the builder from $(pwd) (pip install -e '.[test]')"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e '.[test]'
fi
log "ready: $(command -v builder)"
