#!/usr/bin/env bash
# Run the example project end to end: install, then validate, plan, run and status
# on projects_example/shop (files transport: replays the recorded captures).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q -e ".[dev]"

PROJECT=projects_example/shop
python3 -m ticdc_sync.cli validate --project "$PROJECT"
python3 -m ticdc_sync.cli plan --project "$PROJECT"
python3 -m ticdc_sync.cli run --project "$PROJECT"
python3 -m ticdc_sync.cli status --project "$PROJECT" --show 5
