"""``tether workers grant``: a PostgreSQL role whose workers touch only the runs they hold."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``tether workers grant``."""
    workers = subparsers.add_parser("workers", help="database roles for workers: grant")
    commands = workers.add_subparsers(dest="workers_command", metavar="ACTION", required=True)
    grant = commands.add_parser(
        "grant",
        help="make ROLE a run-scoped worker role of a PostgreSQL run store",
        description=(
            "Connects with --url's (administrator's) credentials, migrates the run store, "
            "the checkpoints and the records, creates ROLE (LOGIN) unless it exists and "
            "grants it what a worker needs. Row-level security then shows a connection "
            "of ROLE only the checkpoints, records and steps of the thread of a run whose "
            "lease its transaction names. Run `tether worker --url "
            "postgresql://ROLE:…@host/db` with it. Idempotent."
        ),
    )
    grant.add_argument("role", metavar="ROLE", help="the worker role (lowercase, a-z 0-9 _)")
    grant.add_argument(
        "--url",
        default=os.environ.get("TETHER_URL"),
        help="the run store's postgresql:// URL, as its administrator (default $TETHER_URL)",
    )
    grant.add_argument(
        "--password-env",
        metavar="VAR",
        help="set ROLE's password to the value of environment variable VAR",
    )
    grant.set_defaults(handler=_grant)


def _grant(args: argparse.Namespace) -> int:
    from tether.runtime import grant_worker_role

    if not args.url:
        print("tether: error: --url (or $TETHER_URL) is required", file=sys.stderr)
        return 2
    password = None
    if args.password_env:
        password = os.environ.get(args.password_env)
        if not password:
            print(
                f"tether: error: --password-env {args.password_env}: that variable is not set",
                file=sys.stderr,
            )
            return 2
    done = asyncio.run(grant_worker_role(args.url, args.role, password=password))
    verb = "created and granted" if done.created else "granted again"
    print(f"worker role {done.role!r} {verb} on database {done.database!r}")
    return 0
