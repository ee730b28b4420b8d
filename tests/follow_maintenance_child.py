"""`ticdc-sync run --follow` with the staging table's maintenance made frequent, for the test that
kills it with SIGKILL in the middle of a trim, a compaction, or a poll beside either
(`tests/kafka/test_follow_maintenance_crash.py`).

    python -m tests.follow_maintenance_child PROJECT

Runs the real command (`commands.cli.main`, `run --follow --project PROJECT`) with a trim
due at every poll (`runner.TRIM_EVERY_POLLS`) and a compaction once a few files were added
(`COMPACT_ABOVE`), and prints a line as each of these begins and ends, flushed at once:
`STAGE start|end` (a source's staging commit, `Staging.stage`), `TRIM start|end <events>`
(a trim's DELETE, `trim.delete`), `COMPACT start|end` (`Staging.compact`), `MAINTAIN
start|end` (a look at a target: its compaction and VACUUM, `spark.apply.maintain`; the
project makes them due at each look). Nothing else differs from the command a user runs.
"""

from __future__ import annotations

import sys
import threading

COMPACT_ABOVE = 4
_print_lock = threading.Lock()


def say(line: str) -> None:
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def marked(name: str, fn, result=None):
    """`fn`, printing `<name> start` before it and `<name> end [<result>]` after it."""

    def wrapper(*args, **kwargs):
        say(f"{name} start")
        out = fn(*args, **kwargs)
        say(f"{name} end" + (f" {result(out)}" if result is not None else ""))
        return out

    return wrapper


def main(project: str) -> int:
    from ticdc_sync.commands import cli
    from ticdc_sync.spark import engine, runner
    from ticdc_sync.spark.apply import maintain
    from ticdc_sync.spark.staging import trim
    from ticdc_sync.spark.staging.table import Staging

    runner.TRIM_EVERY_POLLS = 1
    engine.COMPACT_ABOVE_FILES = COMPACT_ABOVE
    Staging.stage = marked("STAGE", Staging.stage)
    Staging.compact = marked("COMPACT", Staging.compact)
    trim.delete = marked("TRIM", trim.delete, str)
    maintain.maintain = marked("MAINTAIN", maintain.maintain)
    return cli.main(["run", "--follow", "--project", project])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
