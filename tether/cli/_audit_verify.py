"""``tether audit verify``: check the step log's hash chain of one thread or of all.

Registered by :mod:`tether.cli.audit` with the rest of the ``audit`` group."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from tether.checkpointing import open_checkpointer
from tether.store import ChainReport, store_for

__all__ = ["register_action"]


def register_action(commands: Any) -> None:
    """Add ``verify`` to the ``audit`` group's subcommands."""
    verify = commands.add_parser(
        "verify",
        help="check each step log's hash chain; say where it breaks",
        description=(
            "Recomputes every step's digest and link and reports, per thread, whether the "
            "chain holds, or the first step where it breaks (an edited, inserted or removed "
            "step). With encryption on, set the key ring as for the runs. Exits 1 if any "
            "chain is broken."
        ),
    )
    verify.add_argument("--url", required=True, help="the checkpointer URL")
    verify.add_argument("--thread", help="only this thread (default: every thread with steps)")
    verify.add_argument("--key-prefix", help="Redis key prefix the store was opened with")
    verify.add_argument("--quiet", action="store_true", help="print only broken chains")
    verify.set_defaults(handler=_verify)


def describe(report: ChainReport) -> str:
    """One line about one thread's chain."""
    where = f"thread {report.thread_id!r}"
    if not report.ok:
        return f"{where}: BROKEN at step {report.broken_at}: {report.reason}"
    parts = [f"{where}: ok, {report.steps} step(s)"]
    if report.head is not None:
        parts.append(f"head {report.head.link[:16]} (step {report.head.index})")
    if report.unchained_before is not None:
        parts.append(f"unchained before step {report.unchained_before} (written before the chain)")
    elif report.head is None and report.steps:
        parts.append("unchained (every step was written before the chain)")
    if report.removed:
        parts.append(f"{len(report.removed)} removed with their runs")
    return ", ".join(parts)


def _verify(args: argparse.Namespace) -> int:
    options: dict[str, Any] = {}
    if args.key_prefix:
        options["key_prefix"] = args.key_prefix

    async def run() -> list[ChainReport]:
        async with open_checkpointer(args.url, **options) as saver:
            store = store_for(saver)
            threads = [args.thread] if args.thread else await store.step_threads()
            return [await store.verify_chain(thread) for thread in threads]

    reports = asyncio.run(run())
    for report in reports:
        if not (args.quiet and report.ok):
            print(describe(report))
    broken = sum(1 for r in reports if not r.ok)
    print(f"{len(reports)} thread(s) checked, {broken} broken chain(s)")
    return 1 if broken else 0
