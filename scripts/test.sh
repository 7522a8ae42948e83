#!/usr/bin/env bash
# The test command: set up the machine (engine included), then run the whole suite.
#   bash scripts/test.sh            everything (what CI runs): unit and integration tests
#   bash scripts/test.sh --quick    the development loop: the drift checks of the committed
#                                   Dockerfiles and locks, then the unit tests on two
#                                   workers; no engine needed (a few minutes)
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
if [ "$quick" = 1 ]; then
  bash scripts/setup.sh --no-engine
  builder render --all --check
  builder lock --check
  set +e
  python3 -m pytest tests/unit -n 2 -p no:cacheprovider "$@"
else
  bash scripts/setup.sh
  set +e
  python3 -m pytest tests "$@"
fi
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
