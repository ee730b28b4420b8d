"""The arguments of `ticdc-sync`: its commands, their flags and help, as argparse parses them
(`build_parser`). Each command's function comes from `cli`, which runs it.

Must not run anything: no project is loaded here, no command's work is done.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from ticdc_sync import __version__
from ticdc_sync.commands.exit_codes import EXIT_OVER_LAG
from ticdc_sync.core.console import PROGRESS_MODES
from ticdc_sync.core.errors import UserError

Command = Callable[[argparse.Namespace], int]

PROJECT_ENV = "TICDC_SYNC_PROJECT_DIR"
TARGET_ENV = "TICDC_SYNC_TARGET"


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage; 2 means "changes pending" here, so usage errors are 1."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message} (hint: {self.prog} --help)")


def _reload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--reload",
        nargs="+",
        metavar="TARGET",
        help="load these targets again from their source's Dumpling export (initial_load), "
        "then follow the changefeed from its snapshot (fnmatch globs allowed)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --reload: reload even a target that applied changes after the snapshot",
    )


def _metrics_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on PORT at /metrics while the run runs, for "
        "--follow (default: the profile's run.metrics_port, else not served; 0: any free "
        "port, printed)",
    )
    p.add_argument(
        "--metrics-address",
        metavar="ADDR",
        help="the address to serve the metrics on (default: the profile's "
        "run.metrics_address, else 127.0.0.1; 0.0.0.0: every interface)",
    )
    p.add_argument(
        "--metrics-file",
        metavar="PATH",
        help="write the metrics to PATH (ending in .prom) for node exporter's textfile "
        "collector when the run ends (with --follow also after every poll); replaced at once",
    )
    p.add_argument(
        "--metrics-push",
        metavar="URL",
        help="push the metrics to the Pushgateway at URL when the run ends (job ticdc_sync, "
        "grouped by project and profile_target)",
    )


def build_parser(commands: Mapping[str, Command]) -> argparse.ArgumentParser:
    """The parser of `ticdc-sync`, each command bound to its function in `commands`."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: the flags are accepted before and after the command without the
    # subcommand's default overwriting a value given before it.
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks for every error, and Spark's output on the terminal",
    )
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show Spark's output (Ivy, log4j, JVM) on the terminal too, and with "
        "`run --follow` every batch's details",
    )
    common.add_argument(
        "--progress",
        choices=PROGRESS_MODES,
        default=argparse.SUPPRESS,
        help="progress on stderr: a live line (live), a line per phase and every "
        "$TICDC_SYNC_PROGRESS_INTERVAL seconds, 10 by default (lines), or none (off); "
        "default auto: live on a terminal, else lines",
    )
    proj = argparse.ArgumentParser(add_help=False)
    proj.add_argument(
        "--project", metavar="DIR", help=f"project folder (default: ${PROJECT_ENV} or .)"
    )
    proj.add_argument(
        "--target",
        metavar="T",
        help=f"profile target (default: ${TARGET_ENV} or the profile's `target`)",
    )
    proj.add_argument(
        "--profiles-dir",
        metavar="DIR",
        help="folder holding profiles.yml (default: $TICDC_SYNC_PROFILES_DIR, else the project)",
    )

    parser = _Parser(
        prog="ticdc-sync",
        description="Mirror TiDB tables into Delta Lake from TiCDC Kafka topics.",
        parents=[common],
    )
    parser.add_argument(
        "--version", action="version", version=f"ticdc-sync {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("init", parents=[common], help="scaffold a working project in DIR")
    p.add_argument("dir", metavar="DIR", help="new or empty folder for the project")
    p.set_defaults(func=commands["init"])

    p = sub.add_parser("validate", parents=[common, proj], help="check the project files")
    p.set_defaults(func=commands["validate"])

    p = sub.add_parser(
        "plan", parents=[common, proj], help="show what a run will do (deterministic)"
    )
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text for review, or JSON (ticdc_sync/schemas/plan.schema.json) for tools "
        "and `run --plan` (default: text)",
    )
    p.add_argument("--out", metavar="FILE", help="write the plan to FILE instead of stdout")
    p.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 2 when changes are pending (targets to create, upstream DDL to apply)",
    )
    p.add_argument("--explain", action="store_true", help="also print Spark's plans (starts Spark)")
    _reload_args(p)
    p.set_defaults(func=commands["plan"])

    p = sub.add_parser("run", parents=[common, proj], help="apply everything resolved, then exit")
    p.add_argument(
        "--select", nargs="+", metavar="NAME", help="only these targets (fnmatch globs allowed)"
    )
    p.add_argument(
        "--exclude", nargs="+", metavar="NAME", help="not these targets (fnmatch globs allowed)"
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="keep consuming until interrupted, one line per batch",
    )
    p.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="while another run holds the warehouse's run lease, wait up to SECONDS for it "
        "(default: the profile's run_lease.wait_seconds, 0: refuse at once)",
    )
    p.add_argument(
        "--plan",
        metavar="FILE",
        help="execute this saved plan (`plan --format json --out FILE`); refused if the "
        "project or the warehouse changed since it was made",
    )
    _reload_args(p)
    _metrics_args(p)
    p.set_defaults(func=commands["run"])

    p = sub.add_parser(
        "status", parents=[common, proj], help="per-target progress, lag, blocks, quarantine"
    )
    p.add_argument(
        "--show", type=int, default=0, metavar="N", help="also print N rows of each target"
    )
    p.add_argument(
        "--quarantine",
        type=int,
        nargs="?",
        const=20,
        metavar="N",
        help="also list N quarantined records (default 20): position, table, commit_ts, "
        "reason and the start of the raw value",
    )
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text table, or JSON (ticdc_sync/schemas/status.schema.json) (default: text)",
    )
    p.add_argument(
        "--fail-over-lag",
        action="store_true",
        help=f"exit {EXIT_OVER_LAG} when a target's oldest unapplied change is older than its "
        "target_lag (for monitoring; the report is printed as usual)",
    )
    p.set_defaults(func=commands["status"])

    p = sub.add_parser(
        "snapshot",
        parents=[common, proj],
        help="per target, the Delta version that holds the tables as of one TSO, and its SQL",
    )
    p.add_argument(
        "--as-of",
        default="latest",
        metavar="TSO|latest|TIME",
        help="a TiDB TSO, `latest` (the newest TSO every source has resolved), or a time "
        "such as 2026-11-26T22:45:00Z (UTC unless it says otherwise) (default: latest)",
    )
    p.add_argument(
        "--select", nargs="+", metavar="TARGET", help="only these targets (glob patterns)"
    )
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text, or JSON for tools (default: text)",
    )
    p.set_defaults(func=commands["snapshot"])

    p = sub.add_parser(
        "verify",
        parents=[common, proj],
        help="compare the targets with a Dumpling export of the upstream, as of its snapshot",
    )
    p.add_argument(
        "--export",
        metavar="DIR",
        help="the Dumpling export to compare with (a folder or a URI; its `metadata` gives "
        "the TSO the lake is read at) (default: each source's initial_load.dumpling)",
    )
    p.add_argument(
        "--tables",
        nargs="+",
        metavar="TARGET",
        help="only these targets (fnmatch globs allowed) (default: every target)",
    )
    p.add_argument(
        "--show",
        type=int,
        default=10,
        metavar="N",
        help="list up to N differing keys per target (missing, extra, changed) (default: 10)",
    )
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text, or JSON (ticdc_sync/schemas/verify.schema.json) for tools, deterministic "
        "(default: text)",
    )
    p.set_defaults(func=commands["verify"])

    p = sub.add_parser(
        "capture", parents=[common, proj], help="record Kafka topics into capture files"
    )
    p.add_argument("--topic", nargs="+", metavar="T", help="topics (default: every source's)")
    p.add_argument("--out", metavar="DIR", help="captures folder (default: the profile's)")
    p.add_argument("--max-records", type=int, metavar="N", help="stop after N records per topic")
    p.set_defaults(func=commands["capture"])
    return parser
