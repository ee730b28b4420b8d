#!/usr/bin/env bash
# Install ticdc-sync with its dev extras and run the full test suite (unit + Spark).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q -e ".[dev]"

set +e
python3 -m pytest -q "${@:-tests}"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; treating that as a failure" >&2
  exit 1
fi
exit "$rc"
