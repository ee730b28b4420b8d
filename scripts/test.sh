#!/usr/bin/env bash
# Install ticdc-sync with its dev extras and run the full test suite (unit + Spark + the
# process-level tests) in parallel workers; arguments replace the default `tests`.
#
#   ./scripts/test.sh                      # everything (README, CI)
#   ./scripts/test.sh --quick              # the edit-test loop: each module's own tests, without
#                                          # the process-level folders, the multi-run engine
#                                          # scenarios (`e2e`) and the real kills (`slow`)
#   ./scripts/test.sh tests/unit           # one folder (pure tests: seconds)
#   ./scripts/test.sh -n 0 tests/spark     # no workers (one process, one Spark session)
#
# Workers: TICDC_SYNC_TEST_WORKERS (default 2, one per core of the 2-core machines this
# is sized for). Tests that share a broker, an S3 server, a standalone cluster or a module
# fixture run in one worker (`--dist loadgroup`, groups set in tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q -e ".[dev]"

select=()
if [ "${1:-}" = "--quick" ]; then
  shift
  select=(-m "not slow and not e2e")
  [ "$#" -gt 0 ] || set -- tests/unit tests/spark
fi

set +e
python3 -m pytest -q -n "${TICDC_SYNC_TEST_WORKERS:-2}" --dist loadgroup --durations=15 \
  "${select[@]}" "${@:-tests}"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; treating that as a failure" >&2
  exit 1
fi
exit "$rc"
