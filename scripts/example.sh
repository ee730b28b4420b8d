#!/usr/bin/env bash
# Run the example project end to end: install, then validate, plan, run, status, snapshot
# and verify on projects_example/shop (files transport: replays the recorded captures;
# verify compares the lake with expected/dumpling, an export of the upstream's final state).
#
#   ./scripts/example.sh        # its dev target: a warehouse folder in the project
#   ./scripts/example.sh s3     # its s3 target: s3a://${SHOP_S3_BUCKET:-shop}/warehouse
#   ./scripts/example.sh catalog  # its catalog target: every target a named table too,
#                                 # in a Hive metastore kept in the warehouse; the last
#                                 # step reads one by name in a new Spark session
#
# For s3 without AWS_ENDPOINT_URL set, a local S3-compatible server (scripts/s3.py) is
# started for the run, with keys made up here and kept in the environment only, and
# stopped (its data deleted) at the end. With AWS_ENDPOINT_URL set (or for AWS itself,
# with AWS_REGION and credentials), the bucket must exist.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${1:-dev}"
python3 -m pip install -q -e ".[dev]"

if [ "$TARGET" = "s3" ] && [ -z "${AWS_ENDPOINT_URL:-}" ] && [ -z "${AWS_REGION:-}" ]; then
  export AWS_ACCESS_KEY_ID="example-$(python3 -c 'import secrets; print(secrets.token_hex(4))')"
  AWS_SECRET_ACCESS_KEY="$(python3 -c 'import secrets; print(secrets.token_hex(20))')"
  export AWS_SECRET_ACCESS_KEY
  export TICDC_SYNC_S3_RUN_DIR="${TMPDIR:-/tmp}/ticdc-sync-example-s3-$$"
  eval "$(python3 scripts/s3.py start)"
  trap 'python3 scripts/s3.py stop; rm -rf "$TICDC_SYNC_S3_RUN_DIR"' EXIT
  python3 scripts/s3.py bucket "${SHOP_S3_BUCKET:-shop}" >/dev/null
fi

PROJECT=projects_example/shop
python3 -m ticdc_sync.commands.cli validate --project "$PROJECT" --target "$TARGET"
python3 -m ticdc_sync.commands.cli plan --project "$PROJECT" --target "$TARGET"
python3 -m ticdc_sync.commands.cli run --project "$PROJECT" --target "$TARGET"
python3 -m ticdc_sync.commands.cli status --project "$PROJECT" --target "$TARGET" --show 5
python3 -m ticdc_sync.commands.cli snapshot --project "$PROJECT" --target "$TARGET" --as-of latest
python3 -m ticdc_sync.commands.cli verify --project "$PROJECT" --target "$TARGET" \
  --export "$PROJECT/expected/dumpling"
if [ "$TARGET" = "catalog" ]; then
  python3 - "$PROJECT" <<'EOF'
import sys
from ticdc_sync.project import load_project
from ticdc_sync.spark.runner import run_session

spark = run_session(load_project(sys.argv[1], "catalog"))
spark.sql("SHOW TABLES IN lake_shop").show(truncate=False)
spark.sql("SELECT * FROM lake_shop.canal_orders ORDER BY 1").show(5, truncate=False)
EOF
fi
