"""``tether audit``: what the audit store keeps about a thread after its state is gone.

``tether audit show THREAD`` lives here. More actions join the group without
touching this file: a module ``tether/cli/_audit_<name>.py`` whose
``register_action(commands)`` adds its parser to ``commands`` (the ``audit``
group's subparsers) is found and registered when the command line is built.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import pkgutil
import sys
from typing import Any

import tether.cli

__all__ = ["common_options", "register"]


def common_options(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--checkpoints-url``, as every ``tether audit`` action takes them."""
    parser.add_argument(
        "--url",
        default=os.environ.get("TETHER_URL"),
        help="run store: postgresql://… or sqlite:///path (default $TETHER_URL)",
    )
    parser.add_argument("--checkpoints-url", help="where checkpoints live (default: --url)")


def register(subparsers: Any) -> None:
    """Add ``tether audit show`` and every ``_audit_*`` module's action."""
    audit = subparsers.add_parser(
        "audit", help="audit summaries and erasure receipts kept after threads are deleted"
    )
    commands = audit.add_subparsers(dest="audit_command", metavar="ACTION", required=True)
    show = commands.add_parser(
        "show", help="a thread's audit summaries and erasure receipts (after it was deleted)"
    )
    common_options(show)
    show.add_argument("thread_id")
    show.add_argument("--json", action="store_true", help="print them as JSON")
    show.set_defaults(handler=_show)
    for info in sorted(pkgutil.iter_modules(tether.cli.__path__), key=lambda m: m.name):
        if info.name.startswith("_audit_"):
            importlib.import_module(f"tether.cli.{info.name}").register_action(commands)


def _lines(trail: Any) -> list[str]:
    lines = []
    for s in trail.summaries:
        lines += [
            f"summary ({s['state']}) written {s['written_at']}: {s['reason']}",
            f"  tenant {s['tenant_id'] or '(default)'}, created {s['thread_created_at']}, "
            f"last active {s['last_activity_at']}",
            f"  {len(s['runs'])} runs, {s['steps']['total']} steps, {s['model_calls']} model "
            f"calls, {s['tokens']['total']} tokens, ${s['cost_usd']}",
        ]
        lines += [
            f"  run {r['run_id']} {r['status']} {r['started_at'] or '-'} → {r['ended_at'] or '-'}"
            for r in s["runs"]
        ]
        lines += [
            f"  approval {a['approval_id']} {a['action']} {a['outcome']} at "
            f"{a['decided_at'] or '-'} args {a['args_sha256'][:12]} obs "
            f"{a['observations_sha256'][:12]}"
            for a in s["approvals"]
        ]
        lines += [
            f"  tool {t['tool']} {t['state']} idempotency key {t['idempotency_key']}"
            for t in s["tool_effects"]
        ]
        lines.append(f"  step chain head {s['step_chain_head'] or '-'}")
        lines.append(f"  summary sha256 {s['summary_sha256']}")
    for r in trail.receipts:
        counts = ", ".join(f"{k} {v}" for k, v in r["counts"].items() if v)
        lines.append(
            f"erasure {r['receipt_id']} of a {r['subject_kind']} at {r['completed_at']}: "
            f"{counts or 'nothing found'} (receipt sha256 {r['receipt_sha256']})"
        )
    return lines


def _show(args: argparse.Namespace) -> int:
    from tether.retention import audit_trail
    from tether.runtime import Runtime

    if not args.url:
        print("tether: error: --url (or $TETHER_URL) is required", file=sys.stderr)
        return 2

    async def main() -> Any:
        async with Runtime(args.url, checkpoints_url=args.checkpoints_url) as rt:
            return await audit_trail(rt.store, args.thread_id)

    trail = asyncio.run(main())
    if args.json:
        print(json.dumps(trail.to_dict(), indent=2))
    elif trail.empty:
        print(f"no audit summary or erasure receipt for thread {args.thread_id!r}")
    else:
        print("\n".join(_lines(trail)))
    return 0 if not trail.empty else 1
