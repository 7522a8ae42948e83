#!/usr/bin/env bash
# The test command: set up the machine (engine included), then run the whole suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
set +e
python3 -m pytest tests "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
