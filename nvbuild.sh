#!/bin/bash
echo "nvbuild.sh: not yet implemented" >&2
exit 1
