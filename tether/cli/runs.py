"""``tether runs``: list, show, follow, create, resume and cancel runs in a run store."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

__all__ = ["register"]

# Exit codes of --wait/--follow by the status a run ended with.
_EXIT = {"success": 0, "interrupted": 0, "error": 1, "timeout": 1, "cancelled": 2}


def register(subparsers: Any) -> None:
    """Add ``tether runs list|show|events|create|resume|cancel``."""
    runs = subparsers.add_parser(
        "runs", help="runs in a run store: list, show, events, create, resume, cancel"
    )
    commands = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True)

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--url", default=os.environ.get("TETHER_URL"), help="run store (default $TETHER_URL)"
        )
        parser.add_argument("--tenant", default="", help="act for this tenant")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    listing = commands.add_parser("list", help="runs, newest first")
    common(listing)
    listing.add_argument("--thread", help="only this thread's runs")
    listing.add_argument("--status", help="only runs with this status")
    listing.add_argument("--limit", type=int, default=20)
    listing.set_defaults(handler=lambda a: _run(a, _list))

    show = commands.add_parser("show", help="one run, with its last events")
    common(show)
    show.add_argument("run_id")
    show.set_defaults(handler=lambda a: _run(a, _show))

    events = commands.add_parser("events", help="a run's events (--follow: live, to its end)")
    common(events)
    events.add_argument("run_id")
    events.add_argument("--after", type=int, default=0, help="only events after this seq")
    events.add_argument("--follow", action="store_true", help="keep printing until the run stops")
    events.add_argument("--kinds", help="comma-separated event kinds to print")
    events.set_defaults(handler=lambda a: _run(a, _events))

    create = commands.add_parser("create", help="enqueue a run of a graph or assistant")
    common(create)
    create.add_argument("assistant", help="assistant id or graph id")
    create.add_argument("--thread", help="thread id (created if missing)")
    create.add_argument("--input", default="null", help="the input, as JSON")
    create.add_argument("--wait", action="store_true", help="wait until the run stops")
    create.set_defaults(handler=lambda a: _run(a, _create))

    resume = commands.add_parser(
        "resume", help="answer an interrupted run's interrupt; a worker continues the run"
    )
    common(resume)
    resume.add_argument("run_id")
    resume.add_argument("--value", default="null", help="the resume value, as JSON")
    resume.add_argument("--wait", action="store_true", help="wait until the run stops again")
    resume.set_defaults(handler=lambda a: _run(a, _resume))

    cancel = commands.add_parser("cancel", help="cancel a run")
    common(cancel)
    cancel.add_argument("run_id")
    cancel.add_argument("--action", choices=["interrupt", "rollback"], default="interrupt")
    cancel.add_argument("--reason", help="shown on the run")
    cancel.add_argument("--wait", action="store_true", help="wait until the run has stopped")
    cancel.set_defaults(handler=lambda a: _run(a, _cancel))


def _run(
    args: argparse.Namespace, action: Callable[[Any, argparse.Namespace], Awaitable[int]]
) -> int:
    from tether.runtime import Runtime

    if not args.url:
        print("tether: error: --url (or $TETHER_URL) is required", file=sys.stderr)
        return 2

    async def main() -> int:
        async with Runtime(args.url, tenant=args.tenant) as rt:
            return await action(rt, args)

    return asyncio.run(main())


def _age(when: datetime | None) -> str:
    if when is None:
        return "-"
    seconds = int((datetime.now(UTC) - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _clean(text: Any) -> str:
    """One line of text with control characters shown, not obeyed."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _run_json(run: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return json.loads(json.dumps(asdict(run), default=str))  # type: ignore[no-any-return]


async def _list(rt: Any, args: argparse.Namespace) -> int:
    runs = await rt.list(thread_id=args.thread, status=args.status, limit=args.limit)
    if args.json:
        print(json.dumps([_run_json(r) for r in runs], indent=2))
        return 0
    rows = [("RUN_ID", "THREAD", "GRAPH", "STATUS", "ATTEMPT", "WORKER", "AGE")]
    for r in runs:
        rows.append(
            (
                r.run_id,
                _clean(r.thread_id),
                _clean(r.graph_id),
                r.status,
                str(r.attempt),
                _clean(r.worker_id or "-"),
                _age(r.created_at),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _event_line(event: Any) -> str:
    at = event.created_at.strftime("%H:%M:%S.%f")[:-3] if event.created_at else "-"
    data = event.data
    if isinstance(data, dict):
        detail = " ".join(f"{k}={_clean(v)}" for k, v in data.items() if v not in (None, ""))
    else:
        detail = _clean(json.dumps(data, default=str))
    if len(detail) > 160:
        detail = detail[:157] + "..."
    return f"#{event.seq} {at} {_clean(event.kind):<16} {detail}"


async def _show(rt: Any, args: argparse.Namespace) -> int:
    run = await rt.get(args.run_id)
    if args.json:
        print(json.dumps(_run_json(run), indent=2))
        return 0
    fields = [
        ("run", run.run_id),
        ("thread", run.thread_id),
        ("graph", run.graph_id),
        ("status", run.status),
        ("attempt", run.attempt),
        ("resumes", run.resumes),
        ("worker", run.worker_id or "-"),
        ("created", run.created_at),
    ]
    if run.waiting_on:
        fields.append(
            ("waiting on", ", ".join(w.approval_id or w.interrupt_id for w in run.waiting_on))
        )
    if run.cancel_reason or run.ended_reason:
        fields.append(("reason", run.cancel_reason or run.ended_reason))
    if run.error:
        fields.append(("error", f"{run.error.get('error')}: {run.error.get('message')}"))
    for name, value in fields:
        print(f"{name:<11}{_clean(value)}")
    events = await rt.events(run.run_id, after=max(0, run.last_seq - 5))
    if events:
        print("last events:")
        for event in events:
            print("  " + _event_line(event))
    return 0


async def _events(rt: Any, args: argparse.Namespace) -> int:
    kinds = set(args.kinds.split(",")) if args.kinds else None
    if args.follow:
        async for event in rt.follow(args.run_id, after=args.after, kinds=kinds):
            print(json.dumps(_event_json(event)) if args.json else _event_line(event), flush=True)
        run = await rt.get(args.run_id)
        return _EXIT.get(run.status, 0)
    for event in await rt.events(args.run_id, after=args.after, kinds=kinds):
        print(json.dumps(_event_json(event)) if args.json else _event_line(event))
    return 0


def _event_json(event: Any) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "kind": event.kind,
        "ns": event.ns,
        "data": event.data,
        "worker_id": event.worker_id,
        "created_at": str(event.created_at),
    }


def _json_option(name: str, text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except json.JSONDecodeError as error:
        print(f"tether: error: {name} is not valid JSON: {error}", file=sys.stderr)
        return False, None


async def _report(rt: Any, args: argparse.Namespace, run: Any) -> int:
    if args.wait:
        run = await rt.wait(run.run_id)
    print(json.dumps(_run_json(run), indent=2) if args.json else f"{run.run_id} {run.status}")
    return _EXIT.get(run.status, 0) if args.wait else 0


async def _create(rt: Any, args: argparse.Namespace) -> int:
    ok, payload = _json_option("--input", args.input)
    if not ok:
        return 2
    return await _report(
        rt, args, await rt.create(args.assistant, thread_id=args.thread, input=payload)
    )


async def _resume(rt: Any, args: argparse.Namespace) -> int:
    ok, value = _json_option("--value", args.value)
    if not ok:
        return 2
    return await _report(rt, args, await rt.resume(args.run_id, {"resume": value}))


async def _cancel(rt: Any, args: argparse.Namespace) -> int:
    run = await rt.cancel(args.run_id, action=args.action, reason=args.reason, wait=args.wait)
    print(json.dumps(_run_json(run), indent=2) if args.json else f"{run.run_id} {run.status}")
    return 0
