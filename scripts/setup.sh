#!/usr/bin/env bash
# Set up a fresh Debian machine for the builder, idempotently:
#   - Debian packages (registry, debootstrap, ...) when missing, and a current Docker engine:
#     docker.io, docker-cli and docker-buildx from Debian 13 (trixie), pinned so that no other
#     trixie package can come in (Debian 12's Docker 20.10 has been out of support since 2023);
#     cosign (image signatures) from trixie too, under the same pin,
#   - a Docker daemon when none answers (one that answers is used as it is), keeping images
#     in containerd (/etc/docker/daemon.json, written only when the machine has none): that
#     store is what lets BuildKit's default driver export layer caches and OCI archives,
#   - the builder itself, editable, with its test extras.
# Usage: bash scripts/setup.sh [--no-engine]
set -euo pipefail
cd "$(dirname "$0")/.."

want_engine=1
[ "${1:-}" = "--no-engine" ] && want_engine=0

log() { echo "setup: $*" >&2; }

ENGINE_MAJOR=26                                 # trixie's docker.io / docker-cli 26.1.5
BUILDX_PLUGIN=/usr/libexec/docker/cli-plugins/docker-buildx
TRIXIE_SOURCES=/etc/apt/sources.list.d/tfbuilder-trixie.sources
TRIXIE_PIN=/etc/apt/preferences.d/tfbuilder-trixie

engine_is_current() {
  local major
  major=$(dockerd --version 2>/dev/null | sed -n 's/^Docker version \([0-9]*\)\..*/\1/p')
  [ -n "$major" ] && [ "$major" -ge "$ENGINE_MAJOR" ] && [ -x "$BUILDX_PLUGIN" ]
}

# trixie's archive, pinned: -1 for every package, 990 for the engine's three and cosign.
# Nothing else from trixie is ever installed, even as a dependency (containerd, runc, tini
# and libc stay Debian 12's: `apt-get install --dry-run` pulls exactly these from trixie).
add_trixie_engine_source() {
  local key=/usr/share/keyrings/debian-archive-trixie-stable.gpg
  local security_key=/usr/share/keyrings/debian-archive-trixie-security-automatic.gpg
  for k in "$key" "$security_key"; do
    [ -f "$k" ] || { log "no $k (debian-archive-keyring too old?): cannot add trixie's Docker"; exit 1; }
  done
  cat > "$TRIXIE_SOURCES" <<SOURCES
# written by the builder's scripts/setup.sh: Docker 26 and buildx from Debian 13
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: $key

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: trixie-security
Components: main
Signed-By: $security_key
SOURCES
  cat > "$TRIXIE_PIN" <<PIN
# written by the builder's scripts/setup.sh: from trixie, only the Docker engine, CLI, buildx and cosign
Package: *
Pin: release n=trixie
Pin-Priority: -1

Package: *
Pin: release n=trixie-security
Pin-Priority: -1

Package: docker.io docker-cli docker-buildx cosign
Pin: release n=trixie
Pin-Priority: 990

Package: docker.io docker-cli docker-buildx cosign
Pin: release n=trixie-security
Pin-Priority: 990
PIN
}

need_pkgs=()
if [ "$want_engine" = 1 ]; then
  engine_is_current || need_pkgs+=(docker.io docker-cli docker-buildx)
  [ -x /usr/bin/docker-registry ] || need_pkgs+=(docker-registry)
  command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
  [ -x /usr/sbin/nginx ] || need_pkgs+=(nginx)        # the shared compile cache server
  command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
  # cosign signs pushed images with key pairs (builder push --sign, builder verify): one
  # static Go binary from trixie (Debian 12 has none)
  command -v cosign >/dev/null 2>&1 || need_pkgs+=(cosign)
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need_pkgs[*]}; run this script as root (it uses apt-get)"; exit 1
  fi
  log "installing ${need_pkgs[*]} from Debian's archive"
  case " ${need_pkgs[*]} " in *" docker.io "*|*" cosign "*) add_trixie_engine_source ;; esac
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

DAEMON_JSON=/etc/docker/daemon.json

# The containerd image store: written on a machine with no daemon.json; a machine's own
# daemon.json is never rewritten (doctor then reports the store it has).
configure_image_store() {
  if [ ! -e "$DAEMON_JSON" ]; then
    mkdir -p "$(dirname "$DAEMON_JSON")"
    printf '{\n  "features": {"containerd-snapshotter": true}\n}\n' > "$DAEMON_JSON"
    log "wrote $DAEMON_JSON: images are kept in containerd (cache export, OCI output)"
  elif ! grep -q '"containerd-snapshotter" *: *true' "$DAEMON_JSON"; then
    log "note: $DAEMON_JSON does not turn on the containerd image store; left as it is (builder doctor shows what the engine can do)"
  fi
}

if [ "$want_engine" = 1 ]; then
  if ! docker info >/dev/null 2>&1; then
    configure_image_store
    log "starting dockerd (log: /var/log/dockerd.log)"
    # A soft memory limit for the engine's Go runtime: it collects garbage harder above it
    # instead of growing. dockerd 26.1 on this kind of machine has grown from 0.3 to 23 GB in
    # two minutes and swapped the machine to a standstill; if that memory is garbage, this
    # keeps it in bounds (a hard limit it is not: live memory still grows).
    GOMEMLIMIT=${DOCKERD_GOMEMLIMIT:-4GiB} nohup dockerd >/var/log/dockerd.log 2>&1 &
    for _ in $(seq 1 60); do
      docker info >/dev/null 2>&1 && break
      sleep 1
    done
    docker info >/dev/null 2>&1 || { log "dockerd did not come up; see /var/log/dockerd.log"; exit 1; }
  fi
  running=$(docker version --format '{{.Server.Version}}')
  log "docker engine $running is up, buildx $(docker buildx version 2>/dev/null | awk '{print $2}')"
  if [ "${running%%.*}" -lt "$ENGINE_MAJOR" ] 2>/dev/null; then
    log "note: the running engine ($running) is older than the installed one ($(dockerd --version | awk '{print $3}' | tr -d ,)); it is used as it is: stop it and run this script again to start the new one"
  fi
fi

# (Re)install when the importable builder is not this checkout's (a machine can hold
# several clones, and the tests must run the code of the one they are in), when a
# dependency or test tool is missing, or when the `builder` command no longer starts (an
# install made before the command's module moved).
here_pkg="$(pwd)/builder"
installed_pkg=$(cd / && python3 -c "import builder, os; print(os.path.dirname(os.path.realpath(builder.__file__)))" 2>/dev/null || true)
if [ "$installed_pkg" != "$(realpath "$here_pkg")" ] \
   || ! python3 -c "import hypothesis, testinfra, bcrypt, pytest_timeout, pydantic, importlinter, mypy" >/dev/null 2>&1 \
   || ! command -v builder >/dev/null 2>&1 || ! builder --version >/dev/null 2>&1 \
   || ! command -v hadolint >/dev/null 2>&1 || ! command -v ruff >/dev/null 2>&1 || ! command -v lint-imports >/dev/null 2>&1; then
  log "installing the builder from $(pwd) (pip install -e '.[test]')"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e '.[test]'
fi
log "ready: $(command -v builder)"
