"""``tether apikeys``: the API keys ``tether serve`` accepts (create, list, revoke)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["register"]

_DEFAULT_STORE = ".tether/serve.db"


def register(subparsers: Any) -> None:
    """Add ``tether apikeys create|list|revoke``."""
    keys = subparsers.add_parser(
        "apikeys",
        help="API keys for tether serve: create, list, revoke",
        description=(
            "A key names a user, the tenant its requests act for, and roles (checked by "
            "approvals). Only its SHA-256 is stored, in the run store's database; the key "
            "itself is printed once, by create. Clients send it as the x-api-key header or "
            "as 'Authorization: Bearer KEY'."
        ),
    )
    commands = keys.add_subparsers(dest="apikeys_command", metavar="ACTION", required=True)

    def store_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--url",
            default=os.environ.get("TETHER_URL"),
            help=(
                "the run store tether serve uses (default $TETHER_URL, else the SQLite "
                f"file {_DEFAULT_STORE} next to --config)"
            ),
        )
        parser.add_argument(
            "--config", default="langgraph.json", help="the project's langgraph.json"
        )

    create = commands.add_parser("create", help="make a key and print it (once)")
    store_options(create)
    create.add_argument("--user", required=True, help="the user the key authenticates")
    create.add_argument(
        "--tenant", required=True, help="the tenant its requests act for ('' is the default)"
    )
    create.add_argument(
        "--role", action="append", default=[], help="a role of the user (repeatable)"
    )
    create.set_defaults(handler=_create)

    listing = commands.add_parser("list", help="every key: id, user, tenant, roles, state")
    store_options(listing)
    listing.set_defaults(handler=_list)

    revoke = commands.add_parser("revoke", help="revoke a key (by id or the key itself)")
    store_options(revoke)
    revoke.add_argument("key_id", help="the key id `list` shows, or the whole key")
    revoke.set_defaults(handler=_revoke)


def _url(args: argparse.Namespace) -> str:
    if args.url:
        return str(args.url)
    config = Path(args.config)
    root = config if config.is_dir() else config.parent
    store = root.resolve() / _DEFAULT_STORE
    store.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store}"


def _run(args: argparse.Namespace, action: Any) -> Any:
    try:
        from tether.server import apikeys
    except ImportError as exc:
        print(
            f"tether: error: tether apikeys needs the server extra ({exc.name} is missing): "
            "pip install 'tether[server]'",
            file=sys.stderr,
        )
        return None

    async def run() -> Any:
        async with apikeys.open_key_store(_url(args)) as keys:
            return await action(keys)

    return asyncio.run(run())


def _create(args: argparse.Namespace) -> int:
    async def action(keys: Any) -> Any:
        return await keys.create(user=args.user, tenant=args.tenant, roles=args.role)

    made = _run(args, action)
    if made is None:
        return 2
    print(made.secret)
    roles = ", ".join(made.key.roles) or "none"
    print(
        f"key {made.key.key_id} for user {made.key.user!r} of tenant {made.key.tenant!r} "
        f"(roles: {roles}); it is shown only now",
        file=sys.stderr,
    )
    return 0


def _list(args: argparse.Namespace) -> int:
    async def action(keys: Any) -> Any:
        return await keys.list()

    found = _run(args, action)
    if found is None:
        return 2
    for key in found:
        state = "active" if key.active else f"revoked {_when(key.revoked_at)}"
        print(
            f"{key.key_id}  user={key.user}  tenant={key.tenant!r}  "
            f"roles={','.join(key.roles) or '-'}  created {_when(key.created_at)}  {state}"
        )
    return 0


def _revoke(args: argparse.Namespace) -> int:
    async def action(keys: Any) -> Any:
        return await keys.revoke(args.key_id)

    key = _run(args, action)
    if key is None:
        return 2
    print(f"revoked key {key.key_id} of user {key.user!r}")
    return 0


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
