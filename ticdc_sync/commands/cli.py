"""The `ticdc-sync` command line: argv -> exit code, and no logic of its own.

Exit codes: 0 ok, 1 user error (one line per problem on stderr, no traceback unless
--debug), 2 changes pending (`plan --detailed-exitcode`) or a difference found (`verify`),
3 crash (with traceback), 130 interrupted. Results go to stdout; errors, warnings and progress to stderr, and a failing
command's error is its last line there (`console`). Commands that start Spark (`run`,
`capture`, `verify`, `plan --explain`) keep the JVM's output in `target/logs/ticdc-sync.log`
(on the terminal too with --verbose or --debug) and name that file when they fail.
`init`, `validate`, `plan` and `status` never import pyspark; `run`, `capture`, `verify`
and `plan --explain` import the Spark package inside the command function only.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import sys
import traceback
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ticdc_sync.commands import arguments
from ticdc_sync.commands.arguments import PROJECT_ENV, TARGET_ENV, Command
from ticdc_sync.commands.exit_codes import (
    EXIT_CRASH,
    EXIT_DIFFERENT,
    EXIT_OK,
    EXIT_OVER_LAG,
    EXIT_PENDING,
    EXIT_USER_ERROR,
)
from ticdc_sync.core.console import PROGRESS_MODES, Console, log_file
from ticdc_sync.core.errors import ProjectError, UserError
from ticdc_sync.core.interrupts import EXIT_INTERRUPTED

if TYPE_CHECKING:  # an annotation only: importlib.resources.abc is new in Python 3.11
    from importlib.resources.abc import Traversable


_console = Console()


def _out(text: str = "") -> None:
    _console.result(text)


def _err(text: str) -> None:
    _console.error(text)


def _spark_log(project, title: str) -> None:
    """Keep what the JVM this command starts prints in the project's log file."""
    _console.open_log(log_file(project.root), title)


# --------------------------------------------------------------------------- commands


def _load(args: argparse.Namespace):  # -> Project; typed loosely to keep imports lazy-free
    from ticdc_sync.project import load_project

    root = Path(args.project or os.environ.get(PROJECT_ENV) or ".")
    profiles_dir = Path(args.profiles_dir) if args.profiles_dir else None
    project = load_project(root, args.target or os.environ.get(TARGET_ENV) or None, profiles_dir)
    for w in project.warnings:
        _err(w)
    return project


def cmd_init(args: argparse.Namespace) -> int:
    dest = Path(args.dir)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(
            f"{dest}: not empty; refusing to scaffold over it (hint: pick a new folder)"
        )
    name = re.sub(r"[^A-Za-z0-9_]", "_", dest.resolve().name) or "my_project"
    if not re.match(r"[A-Za-z_]", name):
        name = "p_" + name
    _copy_tree(resources.files("ticdc_sync").joinpath("scaffold"), dest, name)
    _out(f"created project {name!r} in {dest}")
    where = shlex.quote(str(dest))
    _out(f"next: ticdc-sync validate --project {where} && ticdc-sync plan --project {where}")
    return EXIT_OK


def _copy_tree(src: Traversable, dest: Path, name: str) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for item in sorted(src.iterdir(), key=lambda t: t.name):
        if item.name in ("__pycache__",):
            continue
        target = dest / item.name
        if item.is_dir():
            _copy_tree(item, target, name)
        else:
            text = item.read_text("utf-8").replace("__PROJECT_NAME__", name)
            target.write_text(text, "utf-8")


def cmd_validate(args: argparse.Namespace) -> int:
    from ticdc_sync.codecs.dumpling_export import check_exports
    from ticdc_sync.core.model import TransportKind
    from ticdc_sync.core.spark_stack import connect_extra_error, remote_needs

    p = _load(args)
    issues = check_exports(p)
    if issues:
        raise ProjectError(issues)
    remote = p.output.spark_remote
    kafka = p.output.transport.kind is TransportKind.KAFKA
    if remote:
        missing = connect_extra_error(remote, kafka)
        if missing is not None:
            raise UserError(f"validate: {missing}")
    n_schemas = len(p.seed_schemas)
    _out(
        f"ok: project {p.name} (target {p.output.name}): {len(p.sources)} sources, "
        f"{len(p.tables)} table entries, {n_schemas} known upstream tables, "
        f"{len(p.warnings)} warnings"
    )
    if remote:
        _out(
            f"spark: a Spark Connect client of {remote}: {remote_needs(kafka)}; "
            "checked when a run connects"
        )
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    from ticdc_sync.plan import build_plan, render_json, render_text
    from ticdc_sync.warehouse.read import read_state

    project = _load(args)
    if args.out:
        _check_writable(Path(args.out))
    plan = build_plan(
        project, read_state(project), reload=tuple(args.reload or ()), force=args.force
    )
    explained = None
    code = EXIT_OK
    if args.explain:
        from ticdc_sync.spark import explain

        explained = {}
        _spark_log(project, "ticdc-sync plan --explain")
        code = explain.explain(
            project, plan, out=explained.__setitem__, jvm_output=_console.jvm_line
        )
    if args.format == "json":
        text = render_json(plan, {"explain": explained} if explained is not None else None)
    else:
        text = render_text(plan)
        if explained:
            text += "".join(f"\n== {k} ==\n{v}\n" for k, v in sorted(explained.items()))
    if args.out:
        Path(args.out).write_text(text, "utf-8")
        _err(f"plan written to {args.out}")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if code == EXIT_OK and args.detailed_exitcode and plan.has_pending:
        return EXIT_PENDING
    return code


def _check_writable(path: Path) -> None:
    if not path.parent.is_dir():
        raise UserError(
            f"--out {path}: folder {path.parent} does not exist (hint: create it, or write the "
            "plan elsewhere)"
        )


def cmd_run(args: argparse.Namespace) -> int:
    project = _load(args)
    saved = None
    if args.plan:
        path = Path(args.plan)
        try:
            saved = (path.read_text("utf-8"), str(path))
        except OSError as e:
            raise UserError(f"--plan {path}: cannot read it ({e.strerror})") from None
    from ticdc_sync.run.metrics_export import metrics_options

    metrics = metrics_options(
        port=args.metrics_port,
        address=args.metrics_address,
        file=args.metrics_file,
        push=args.metrics_push,
        profile_port=project.output.metrics_port,
        profile_address=project.output.metrics_address,
    )
    from ticdc_sync.spark import runner

    if args.follow and args.reload:
        raise UserError("--reload loads once: run it without --follow (hint: then --follow)")
    _spark_log(project, "ticdc-sync run" + (" --follow" if args.follow else ""))
    # --follow prints one line per batch; its details go to the log (and with --verbose
    # to the terminal too).
    _console.details = not args.follow or _console.verbose
    return runner.run(
        project,
        select=tuple(args.select or ()),
        exclude=tuple(args.exclude or ()),
        follow=args.follow,
        saved_plan=saved,
        console=_console,
        wait=args.wait,
        reload=tuple(args.reload or ()),
        force=args.force,
        metrics=metrics,
    )


def cmd_status(args: argparse.Namespace) -> int:
    import json

    from ticdc_sync.commands import status

    if args.quarantine is not None and args.quarantine < 1:
        raise UserError(f"--quarantine {args.quarantine}: give a number of records, 1 or more")
    project = _load(args)
    rep = status.report(project, quarantine_limit=args.quarantine or 0)
    if args.format == "json":
        sys.stdout.write(json.dumps(rep, indent=2, sort_keys=True) + "\n")
        sys.stdout.flush()
    else:
        _out(status.render(rep))
    if args.show:
        from ticdc_sync.plan import build_plan
        from ticdc_sync.warehouse.read import read_state

        status.show_rows(build_plan(project, read_state(project)), args.show, _out)
    if args.fail_over_lag and rep["over_lag"]:
        return EXIT_OVER_LAG
    return EXIT_OK


def cmd_snapshot(args: argparse.Namespace) -> int:
    import json

    from ticdc_sync.read import snapshot

    project = _load(args)
    s = snapshot.snapshot(project, args.as_of, args.select or ())
    if args.format == "json":
        sys.stdout.write(json.dumps(snapshot.to_json(s), indent=2, sort_keys=True) + "\n")
        sys.stdout.flush()
    else:
        for line in snapshot.render(s):
            _out(line)
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from ticdc_sync.read import verify_report

    if args.show < 0:
        raise UserError(f"--show {args.show}: give a number of keys per target, 0 or more")
    project = _load(args)
    from ticdc_sync.spark import verify

    _spark_log(project, "ticdc-sync verify")
    report = verify.verify(
        project,
        export=args.export,
        tables=tuple(args.tables or ()),
        show=args.show,
        jvm_output=_console.jvm_line,
    )
    if args.format == "json":
        sys.stdout.write(verify_report.json_text(report))
        sys.stdout.flush()
    else:
        for line in verify_report.render(report):
            _out(line)
    return EXIT_OK if report.equal else EXIT_DIFFERENT


def cmd_capture(args: argparse.Namespace) -> int:
    project = _load(args)
    from ticdc_sync.spark import capture

    _spark_log(project, "ticdc-sync capture")
    return capture.capture(
        project,
        topics=args.topic or None,
        out_dir=args.out,
        max_records=args.max_records,
        out=_console,
        jvm_output=_console.jvm_line,
    )


COMMANDS: dict[str, Command] = {
    "init": cmd_init,
    "validate": cmd_validate,
    "plan": cmd_plan,
    "run": cmd_run,
    "status": cmd_status,
    "snapshot": cmd_snapshot,
    "verify": cmd_verify,
    "capture": cmd_capture,
}


def build_parser() -> argparse.ArgumentParser:
    return arguments.build_parser(COMMANDS)


def _flag(argv: list[str], name: str) -> bool:
    return name in argv[: argv.index("--")] if "--" in argv else name in argv


def _progress_mode(argv: list[str]) -> str:
    for i, a in enumerate(argv):
        if a == "--progress" and i + 1 < len(argv):
            return argv[i + 1] if argv[i + 1] in PROGRESS_MODES else "auto"
        if a.startswith("--progress="):
            value = a.split("=", 1)[1]
            return value if value in PROGRESS_MODES else "auto"
    return "auto"


def main(argv: list[str] | None = None) -> int:
    global _console
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _flag(argv, "--debug")
    _console = Console(
        verbose=debug or _flag(argv, "--verbose") or _flag(argv, "-v"),
        debug=debug,
        progress=_progress_mode(argv),
    )
    try:
        return _main(argv, debug)
    finally:
        _console.close()


def _main(argv: list[str], debug: bool) -> int:
    try:
        args = build_parser().parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        code = int(func(args))
        if code not in (EXIT_OK, EXIT_PENDING, EXIT_INTERRUPTED):
            _failed_tail()
        return code
    except ProjectError as exc:
        for issue in exc.issues:
            _err(issue.render())
        n = len(exc.issues)
        _err(f"{n} problem{'s' if n != 1 else ''} found")
        if debug:
            traceback.print_exc()
        return EXIT_USER_ERROR
    except UserError as exc:
        _console.progress_off()
        if debug:
            traceback.print_exc()
        _log_line()
        for line in str(exc).splitlines() or [type(exc).__name__]:
            _err(f"error: {line}")
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        # A second Ctrl-C while Python shuts down (Spark's exit handlers) ends it quietly.
        signal.signal(signal.SIGINT, lambda *_: os._exit(EXIT_INTERRUPTED))
        _console.progress_off()
        _err("interrupted")
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # --help and friends
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except BaseException:  # noqa: BLE001 - a crash: say so loudly, with the traceback
        _console.progress_off()
        traceback.print_exc()
        _log_line()
        _err("ticdc-sync crashed; this is a bug, please report it with the traceback above")
        return EXIT_CRASH


def _log_line() -> None:
    """Where Spark's output of this command went, if it started Spark."""
    path = _console.log_path
    if path is None or not _console.jvm_lines:
        return
    shown = os.path.relpath(path)
    _err(f"log: {shown if not shown.startswith('..') else path} (Spark's output)")


def _failed_tail() -> None:
    """A command that failed ends with its error lines on stderr: the log file's name,
    then every error it printed (once each), the last one last."""
    _console.progress_off()
    _log_line()
    for line in _console.errors:
        _err(line)


if __name__ == "__main__":
    sys.exit(main())
