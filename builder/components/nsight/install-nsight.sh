#!/bin/bash
# install-nsight.sh SYSTEMS_VERSION COMPUTE_VERSION: nsys and ncu from Debian non-free
# without their GUIs. apt installs the -target packages (the command lines); of the GUI
# packages, only what the command lines need is unpacked: nsys's QdstrmImporter (it turns
# a profile into the report file) with the libraries it links from its own directory, and
# ncu's stock sections. Run under with-build-settings' apt configuration (proxy, CA).
set -euo pipefail
systems=$1 compute=$2
extra=()
# QdstrmImporter 2023.4 (trixie) links libssh and libpfm from the system
if grep -q '^VERSION_CODENAME=trixie' /etc/os-release; then extra=(libssh-4 libpfm4); fi
apt-get install -y --no-install-recommends \
  "nsight-systems-target=$systems" "nsight-compute-target=$compute" "${extra[@]}"
work=$(mktemp -d)
cd "$work"
apt-get download "nsight-systems=$systems" "nsight-compute=$compute"
mkdir gui
dpkg-deb --fsys-tarfile nsight-systems_*.deb | tar -x -C gui ./usr/lib/nsight-systems/host-linux-x64
dpkg-deb --fsys-tarfile nsight-compute_*.deb | tar -x -C / ./usr/lib/x86_64-linux-gnu/nsight-compute/sections
src=$work/gui/usr/lib/nsight-systems/host-linux-x64
dst=/usr/lib/nsight-systems/host-linux-x64
mkdir -p "$dst"
cp -a "$src/QdstrmImporter" "$dst/"
# each library the importer resolves in (or misses outside) its directory, with its chain of links
for lib in $(LD_LIBRARY_PATH=$src ldd "$src/QdstrmImporter" | awk -v d="$src/" 'index($3, d) == 1 || $3 == "not" {print $1}' | sort -u); do
  while [ -L "$src/$lib" ] || [ -e "$src/$lib" ]; do
    cp -a "$src/$lib" "$dst/"
    [ -L "$src/$lib" ] || break
    next=$(readlink "$src/$lib")
    [ "${next#*/}" = "$next" ] || break
    lib=$next
  done
done
# Debian's packages put the importer where nsys does not look (next to nsys's real
# directory, which no package creates): without this link `nsys profile` leaves no report.
ln -sfn ../../nsight-systems/host-linux-x64 /usr/lib/x86_64-linux-gnu/nsight-systems/host-linux-x64
if (cd "$dst" && LD_LIBRARY_PATH=. ldd ./QdstrmImporter | grep 'not found'); then
  echo "install-nsight.sh: QdstrmImporter misses a library" >&2
  exit 1
fi
ln -sf /usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys /usr/local/bin/nsys
ln -sf /usr/lib/x86_64-linux-gnu/nsight-compute/target/linux-desktop-glibc_2_11_3-x64/ncu /usr/local/bin/ncu
cd /
rm -rf "$work"
nsys --version
ncu --version
