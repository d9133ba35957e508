"""``tether retention run``: apply a retention policy now, for cron or by hand."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``tether retention run``."""
    retention = subparsers.add_parser(
        "retention", help="retention policies: sweep old threads now (the scheduler does it too)"
    )
    commands = retention.add_subparsers(dest="retention_command", metavar="ACTION", required=True)
    run = commands.add_parser(
        "run",
        help="apply the policy once: delete or prune threads past their age",
        description=(
            "Pages through the threads last active before the policy's youngest max_age, "
            "writes an audit summary before deleting one, and prints a summary. Safe to "
            "stop and run again: a half-done deletion is finished first."
        ),
    )
    run.add_argument(
        "--url",
        default=os.environ.get("TETHER_URL"),
        help="run store: postgresql://… or sqlite:///path (default $TETHER_URL)",
    )
    run.add_argument("--checkpoints-url", help="where checkpoints live (default: --url)")
    run.add_argument(
        "--policy",
        default="tether.json",
        help='a tether.json with a "retention" section (default ./tether.json)',
    )
    run.add_argument("--dry-run", action="store_true", help="decide and count; delete nothing")
    run.add_argument("--now", help="measure ages from this ISO 8601 time (default: now)")
    run.add_argument(
        "--concurrency",
        type=_positive_int,
        default=4,
        help="threads of a batch handled at once (at least 1)",
    )
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument("--quiet", action="store_true", help="no progress line")
    run.set_defaults(handler=_run)


def _positive_int(text: str) -> int:
    """``--concurrency``: an integer of at least 1, or an argparse error naming the option."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer (at least 1)")
    return value


def _progress(report: Any) -> None:
    verb = "would be " if report.dry_run else ""
    line = (
        f"\rbatch {report.batches}: {report.examined} examined, {report.deleted} {verb}deleted, "
        f"{report.pruned} {verb}pruned, {report.kept_pending_approval + report.awaiting_expiry} "
        f"kept for approvals ({report.threads_per_second:.0f} threads/s)"
    )
    print(line, end="", file=sys.stderr, flush=True)


def _summary(report: Any) -> str:
    verb = "would be " if report.dry_run else ""
    return "\n".join(
        [
            f"examined {report.examined} threads in {report.seconds:.2f}s "
            f"({report.threads_per_second:.0f} threads/s, {report.batches} batches)",
            f"  {verb}deleted:              {report.deleted}",
            f"  {verb}pruned:               {report.pruned}",
            f"  kept (pending approval): {report.kept_pending_approval}",
            f"  kept (awaiting expiry):  {report.awaiting_expiry}",
            f"  skipped (run active):    {report.active}",
            f"  not due:                 {report.not_due}",
            f"  changed meanwhile:       {report.changed}",
            f"  resumed deletions:       {report.resumed}",
            f"  audit records expired:  {report.audit_expired}",
            f"  failed:                  {report.failed}",
            *(f"    {e}" for e in report.errors),
        ]
    )


def _run(args: argparse.Namespace) -> int:
    from tether.retention import load_policy, sweep
    from tether.runtime import Runtime

    if not args.url:
        print("tether: error: --url (or $TETHER_URL) is required", file=sys.stderr)
        return 2
    now = None
    if args.now:
        try:
            now = datetime.fromisoformat(args.now)
        except ValueError:
            print(f"tether: error: --now {args.now!r} is not an ISO 8601 time", file=sys.stderr)
            return 2
        if now.tzinfo is None:
            print(f"tether: error: --now {args.now!r} needs a UTC offset", file=sys.stderr)
            return 2
    policy = load_policy(Path(args.policy))
    if now is not None:
        try:
            policy.check_now(now)
        except ValueError as exc:
            print(f"tether: error: --{exc}", file=sys.stderr)  # "--now: …"
            return 2
    from tether.retention import NoRunStoreError, check_run_store

    try:
        asyncio.run(check_run_store(args.url))
    except NoRunStoreError as exc:
        print(f"tether: error: {exc}", file=sys.stderr)
        return 2

    async def main() -> Any:
        async with Runtime(args.url, checkpoints_url=args.checkpoints_url) as rt:
            progress = None if args.quiet or args.json else _progress
            return await sweep(
                rt,
                policy,
                now=now,
                dry_run=args.dry_run,
                progress=progress,
                concurrency=args.concurrency,
            )

    report = asyncio.run(main())
    if not (args.quiet or args.json):
        print(file=sys.stderr)
    print(json.dumps(report.to_dict(), indent=2) if args.json else _summary(report))
    return 1 if report.failed else 0
