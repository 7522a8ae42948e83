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
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need_pkgs[*]}; run this script as root (it uses apt-get)"; exit 1
  fi
  log "installing ${need_pkgs[*]} from Debian's archive"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
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

if ! python3 -c "import builder.cli, hypothesis" >/dev/null 2>&1 || ! command -v builder >/dev/null 2>&1 \
   || ! command -v hadolint >/dev/null 2>&1; then
  log "installing the builder (pip install -e '.[test]')"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e '.[test]'
fi
log "ready: $(command -v builder)"
