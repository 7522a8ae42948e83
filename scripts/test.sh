#!/usr/bin/env bash
# The test command: set up the machine (engine included), then run the whole suite.
#   bash scripts/test.sh            everything (what CI runs): unit, GPU (skipped without one) and integration tests
#   bash scripts/test.sh --quick    the development loop: the drift checks of the committed
#                                   Dockerfiles and locks, ruff and mypy, then the unit tests on two
#                                   workers; no engine needed (a few minutes)
# Extra arguments go to pytest (one session over tests/), e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
code_checks() {
  # the code's own checks: lint, format, types (pyproject.toml holds their settings); the
  # import contracts run as tests/unit/test_architecture.py
  ruff check builder tests bench scripts setup.py
  ruff format --check builder tests bench scripts setup.py
  mypy
}
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
if [ "$quick" = 1 ]; then
  bash scripts/setup.sh --no-engine
  builder render --all --check
  builder lock --check
  code_checks
  set +e
  python3 -m pytest tests/unit tests/gpu -n 2 -p no:cacheprovider "$@"
  rc=$?
elif [ "$#" = 0 ]; then
  # Everything, in two sessions: the unit tests on two workers (a minute), then the
  # integration tests (one engine, built images shared through session fixtures) within
  # what is left of the run's time budget (tests/conftest.py).
  start=$SECONDS
  bash scripts/setup.sh
  code_checks
  set +e
  python3 -m pytest tests/unit tests/gpu -n 2
  unit=$?
  TEST_TIME_BUDGET=$(( ${TEST_TIME_BUDGET:-4500} - (SECONDS - start) )) python3 -m pytest tests/integration
  rc=$?
  if [ "$rc" = 0 ] && [ "$unit" != 0 ]; then rc=$unit; fi
else
  bash scripts/setup.sh
  set +e
  python3 -m pytest tests "$@"
  rc=$?
fi
set -e
if [ "$rc" = 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
