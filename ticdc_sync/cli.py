"""The `ticdc-sync` command line: argv -> exit code, and no logic of its own.

Exit codes: 0 ok, 1 user error (one line per problem on stderr, no traceback unless
--debug), 2 changes pending (`plan --detailed-exitcode`), 3 crash (with traceback).
`init`, `validate` and `plan` never import pyspark; `run`, `status`, `capture` and
`plan --explain` import the Spark package inside the command function only.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from collections.abc import Callable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ticdc_sync.errors import ProjectError, UserError

EXIT_OK = 0
EXIT_USER_ERROR = 1
EXIT_PENDING = 2
EXIT_CRASH = 3

PROJECT_ENV = "TICDC_SYNC_PROJECT_DIR"
TARGET_ENV = "TICDC_SYNC_TARGET"


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage; 2 means "changes pending" here, so usage errors are 1."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message} (hint: {self.prog} --help)")


def _out(text: str = "") -> None:
    print(text, flush=True)


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- commands


def _load(args: argparse.Namespace):  # -> Project; typed loosely to keep imports lazy-free
    from ticdc_sync.project import load_project

    root = Path(args.project or os.environ.get(PROJECT_ENV) or ".")
    project = load_project(root, args.target or os.environ.get(TARGET_ENV) or None)
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
    _out(f"next: ticdc-sync validate --project {dest} && ticdc-sync plan --project {dest}")
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
    from ticdc_sync.dumpling import check_exports

    p = _load(args)
    issues = check_exports(p)
    if issues:
        raise ProjectError(issues)
    n_schemas = len(p.seed_schemas)
    _out(
        f"ok: project {p.name} (target {p.output.name}): {len(p.sources)} sources, "
        f"{len(p.tables)} table entries, {n_schemas} known upstream tables, "
        f"{len(p.warnings)} warnings"
    )
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    from ticdc_sync.plan import build_plan, render_json, render_text
    from ticdc_sync.warehouse import read_state

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
        code = explain.explain(project, plan, out=explained.__setitem__)
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
    from ticdc_sync.spark import runner

    if args.follow and args.reload:
        raise UserError("--reload loads once: run it without --follow (hint: then --follow)")
    return runner.run(
        project,
        select=tuple(args.select or ()),
        exclude=tuple(args.exclude or ()),
        follow=args.follow,
        out=_out,
        saved_plan=saved,
        reload=tuple(args.reload or ()),
        force=args.force,
    )


def cmd_status(args: argparse.Namespace) -> int:
    import json

    from ticdc_sync import status

    project = _load(args)
    rep = status.report(project)
    if args.format == "json":
        sys.stdout.write(json.dumps(rep, indent=2, sort_keys=True) + "\n")
    else:
        _out(status.render(rep))
    if args.show:
        from ticdc_sync.plan import build_plan
        from ticdc_sync.warehouse import read_state

        status.show_rows(build_plan(project, read_state(project)), args.show, _out)
    return EXIT_OK


def cmd_capture(args: argparse.Namespace) -> int:
    project = _load(args)
    from ticdc_sync.spark import capture

    return capture.capture(
        project,
        topics=args.topic or None,
        out_dir=args.out,
        max_records=args.max_records,
        out=_out,
    )


# --------------------------------------------------------------------------- parser


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


def build_parser() -> argparse.ArgumentParser:
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks for every error",
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

    parser = _Parser(
        prog="ticdc-sync",
        description="Mirror TiDB tables into Delta Lake from TiCDC Kafka topics.",
        parents=[debug],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("init", parents=[debug], help="scaffold a working project in DIR")
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("validate", parents=[debug, proj], help="check the project files")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "plan", parents=[debug, proj], help="show what a run will do (deterministic)"
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--out", metavar="FILE", help="write the plan to FILE instead of stdout")
    p.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 2 when changes are pending (targets to create, upstream DDL to apply)",
    )
    p.add_argument("--explain", action="store_true", help="also print Spark's plans (starts Spark)")
    _reload_args(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("run", parents=[debug, proj], help="apply everything resolved, then exit")
    p.add_argument(
        "--select", nargs="+", metavar="NAME", help="only these targets (fnmatch globs allowed)"
    )
    p.add_argument(
        "--exclude", nargs="+", metavar="NAME", help="not these targets (fnmatch globs allowed)"
    )
    p.add_argument("--follow", action="store_true", help="keep consuming until interrupted")
    p.add_argument(
        "--plan",
        metavar="FILE",
        help="execute this saved plan (`plan --format json --out FILE`); refused if the "
        "project or the warehouse changed since it was made",
    )
    _reload_args(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("status", parents=[debug, proj], help="per-table progress, lag, blocks")
    p.add_argument(
        "--show", type=int, default=0, metavar="N", help="also print N rows of each target"
    )
    p.add_argument("--format", choices=["text", "json"], default="text", help="text table or JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser(
        "capture", parents=[debug, proj], help="record Kafka topics into capture files"
    )
    p.add_argument("--topic", nargs="+", metavar="T", help="topics (default: every source's)")
    p.add_argument("--out", metavar="DIR", help="captures folder (default: the profile's)")
    p.add_argument("--max-records", type=int, metavar="N", help="stop after N records per topic")
    p.set_defaults(func=cmd_capture)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        args = build_parser().parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        return int(func(args))
    except ProjectError as exc:
        for issue in exc.issues:
            _err(issue.render())
        n = len(exc.issues)
        _err(f"{n} problem{'s' if n != 1 else ''} found")
        if debug:
            traceback.print_exc()
        return EXIT_USER_ERROR
    except UserError as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            _err(f"error: {line}")
        if debug:
            traceback.print_exc()
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except SystemExit as exc:  # --help and friends
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except BaseException:  # noqa: BLE001 - a crash: say so loudly, with the traceback
        traceback.print_exc()
        _err("ticdc-sync crashed; this is a bug, please report it with the traceback above")
        return EXIT_CRASH


if __name__ == "__main__":
    sys.exit(main())
