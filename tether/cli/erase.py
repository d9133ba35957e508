"""``tether erase``: delete everything tether stored for a thread, a tenant or a user."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``tether erase``."""
    parser = subparsers.add_parser(
        "erase",
        help="erase a thread, a tenant or a user: checkpoints, records, steps, runs, events",
        description=(
            "Deletes everything tether stored for the subject and prints the receipt (kept "
            "in the audit store; `tether audit show THREAD` finds it). A user is the owner "
            "or user_id in a thread's metadata."
        ),
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("TETHER_URL"),
        help="run store: postgresql://… or sqlite:///path (default $TETHER_URL)",
    )
    parser.add_argument("--checkpoints-url", help="where checkpoints live (default: --url)")
    subject = parser.add_mutually_exclusive_group(required=True)
    subject.add_argument("--thread", help="erase this thread")
    subject.add_argument("--tenant", help="erase every thread of this tenant")
    subject.add_argument("--user", help="erase every thread this user owns")
    parser.set_defaults(handler=_erase)


def _erase(args: argparse.Namespace) -> int:
    from tether.retention import erase
    from tether.runtime import Runtime

    if not args.url:
        print("tether: error: --url (or $TETHER_URL) is required", file=sys.stderr)
        return 2
    if args.thread is None:  # a thread id is erased even where only a checkpointer kept it
        from tether.retention import NoRunStoreError, check_run_store

        try:
            asyncio.run(check_run_store(args.url, "erasing a tenant or a user"))
        except NoRunStoreError as exc:
            print(f"tether: error: {exc}", file=sys.stderr)
            return 2

    async def main() -> Any:
        async with Runtime(args.url, checkpoints_url=args.checkpoints_url) as rt:
            return await erase(rt, thread=args.thread, tenant=args.tenant, user=args.user)

    receipt = asyncio.run(main())
    print(json.dumps(receipt.to_dict(), indent=2))
    return 0
