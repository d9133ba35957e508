"""``tether crashtest MODULE:GRAPH --url URL``: kill a graph at every boundary and resume it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tether.cli._cwd import cwd_first_on_sys_path

__all__ = ["register"]

_DESCRIPTION = """\
Run the target once unkilled, then once per boundary it reached (before and after
each model call, tool effect, undo of a compensation, checkpoint put and put_writes):
SIGKILL a child process there, resume the thread in a fresh process, and compare the
final state and the effects with the unkilled run. Exits 0 only if every run was
killed, completed with an equal state, made no duplicate effect, missed no
compensation and re-asked no recorded model call.

MODULE:GRAPH names a tether.crashtest.CrashTarget, or a function returning one,
for example tether.graphs.refund:crash_target."""


def register(subparsers: Any) -> None:
    """Add the ``crashtest`` subcommand."""
    parser = subparsers.add_parser(
        "crashtest",
        help="kill a graph at every boundary, resume it, compare with a clean run",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "target", metavar="MODULE:GRAPH", help="a CrashTarget, or a function returning one"
    )
    parser.add_argument(
        "--url",
        required=True,
        help="sqlite:///path/crash.db, postgresql://user@host/db or redis://host:port; every "
        "run gets a fresh database (a new key prefix on redis) derived from it; postgres "
        "needs CREATEDB",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="boundaries tested in parallel (default 2)"
    )
    parser.add_argument(
        "--scratch",
        type=Path,
        default=None,
        help="directory for working files (default: a temporary directory, "
        "removed after a clean run)",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from tether.crashtest import run_crashtest

    cwd_first_on_sys_path()
    report = run_crashtest(
        args.target,
        args.url,
        workers=args.workers,
        scratch=args.scratch,
        progress=lambda line: print(line, flush=True),
    )
    print(report.summary(), flush=True)
    return 0 if report.ok else 1
