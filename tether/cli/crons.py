"""``tether crons``: list, create, update and delete the schedules that create runs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from typing import Any

from tether.cli.runs import _clean, _json_option, _run, _run_json

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``tether crons list|create|update|delete``."""
    crons = subparsers.add_parser(
        "crons", help="schedules that create runs: list, create, update, delete"
    )
    commands = crons.add_subparsers(dest="crons_command", metavar="ACTION", required=True)

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--url", default=os.environ.get("TETHER_URL"), help="run store (default $TETHER_URL)"
        )
        parser.add_argument("--tenant", default="", help="act for this tenant")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    listing = commands.add_parser("list", help="crons, oldest first")
    common(listing)
    listing.add_argument("--assistant", help="only this assistant's crons")
    listing.add_argument("--thread", help="only this thread's crons")
    listing.set_defaults(handler=lambda a: _run(a, _list))

    create = commands.add_parser(
        "create", help="fire a run of a graph or assistant on a cron schedule"
    )
    common(create)
    create.add_argument("assistant", help="assistant id or graph id")
    create.add_argument("schedule", help="cron expression, e.g. '*/5 * * * *' (quote it)")
    create.add_argument("--thread", help="every run continues this thread (default: stateless)")
    create.add_argument("--input", default="null", help="each run's input, as JSON")
    create.add_argument("--timezone", help="IANA zone the schedule is read in (default UTC)")
    create.add_argument("--metadata", default="{}", help="the cron's metadata, as JSON")
    create.add_argument("--end-time", help="no fire after this ISO 8601 time (with an offset)")
    create.add_argument("--disabled", action="store_true", help="create it disabled")
    create.set_defaults(handler=lambda a: _run(a, _create))

    update = commands.add_parser("update", help="change a cron's schedule, or turn it on or off")
    common(update)
    update.add_argument("cron_id")
    update.add_argument("--schedule", help="a new cron expression")
    switch = update.add_mutually_exclusive_group()
    switch.add_argument("--enable", dest="enabled", action="store_const", const=True)
    switch.add_argument("--disable", dest="enabled", action="store_const", const=False)
    update.set_defaults(handler=lambda a: _run(a, _update))

    delete = commands.add_parser("delete", help="delete a cron (its runs stay)")
    common(delete)
    delete.add_argument("cron_id")
    delete.set_defaults(handler=lambda a: _run(a, _delete))


def _table(crons: list[Any]) -> None:
    rows = [("CRON_ID", "ASSISTANT", "THREAD", "SCHEDULE", "TIMEZONE", "ENABLED", "NEXT_RUN")]
    for c in crons:
        rows.append(
            (
                c.cron_id,
                _clean(c.assistant_id),
                _clean(c.thread_id or "-"),
                _clean(c.schedule),
                _clean(c.timezone or "UTC"),
                "yes" if c.enabled else "no",
                c.next_run_at.isoformat(timespec="seconds"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _show(args: argparse.Namespace, crons: list[Any]) -> None:
    if args.json:
        print(json.dumps([_run_json(c) for c in crons], indent=2))
    else:
        _table(crons)


async def _list(rt: Any, args: argparse.Namespace) -> int:
    _show(args, await rt.list_crons(assistant_id=args.assistant, thread_id=args.thread))
    return 0


async def _create(rt: Any, args: argparse.Namespace) -> int:
    ok_input, payload = _json_option("--input", args.input)
    ok_meta, metadata = _json_option("--metadata", args.metadata)
    if not (ok_input and ok_meta):
        return 2
    end_time = None
    if args.end_time:
        try:
            end_time = datetime.fromisoformat(args.end_time)
        except ValueError:
            shown = f"--end-time {args.end_time!r}"
            print(f"tether: error: {shown} is not an ISO 8601 time", file=sys.stderr)
            return 2
    cron = await rt.create_cron(
        args.assistant,
        args.schedule,
        thread_id=args.thread,
        input=payload,
        metadata=metadata,
        timezone=args.timezone,
        end_time=end_time,
        enabled=not args.disabled,
    )
    _show(args, [cron])
    return 0


async def _update(rt: Any, args: argparse.Namespace) -> int:
    cron = await rt.update_cron(args.cron_id, schedule=args.schedule, enabled=args.enabled)
    _show(args, [cron])
    return 0


async def _delete(rt: Any, args: argparse.Namespace) -> int:
    await rt.delete_cron(args.cron_id)
    print(f"deleted {args.cron_id}")
    return 0
