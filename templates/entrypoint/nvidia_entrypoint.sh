#!/bin/bash
# NGC-style entrypoint: show the parts in /opt/nvidia/entrypoint.d in name order
# (.txt files are printed, .sh files are sourced), then run the command or a shell.
# Its path and name are NGC's interface (scripts written for NGC images call it), not a
# claim that NVIDIA made the image: the banner names the catalog's vendor.
set -e
for part in /opt/nvidia/entrypoint.d/*; do
  case "$part" in
    *.txt) cat "$part" ;;
    *.sh)  # shellcheck disable=SC1090
           source "$part" ;;
  esac
done
echo
if [ $# -eq 0 ]; then
  exec /bin/bash
fi
exec "$@"
