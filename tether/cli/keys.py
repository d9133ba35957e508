"""``tether keys``: make encryption keys and rotate a store onto the active one."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from tether.checkpointing import (
    ENV_KEYS,
    KeyRing,
    MissingKeyError,
    RotationReport,
    open_checkpointer,
    rotate_keys,
)
from tether.runtime.store import ResealCounts, open_run_store

__all__ = ["register"]

_RUN_STORES = ("postgresql://", "postgres://", "sqlite:///")


def register(subparsers: Any) -> None:
    """Add ``tether keys generate`` and ``tether keys rotate``."""
    keys = subparsers.add_parser("keys", help="encryption keys: generate, rotate")
    commands = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)

    generate = commands.add_parser(
        "generate", help="print a fresh '<id>:<base64 key>' for TETHER_ENCRYPTION_KEYS"
    )
    generate.add_argument("--id", dest="key_id", help="key id (default: random 'k' + 8 hex)")
    generate.set_defaults(handler=_generate)

    rotate = commands.add_parser(
        "rotate",
        help=(
            "re-encrypt every stored checkpoint, write, record and step under the active "
            "(first) key"
        ),
        description=(
            f"Reads the key ring from {ENV_KEYS} (new key first, old keys after it) and "
            "re-encrypts every value not yet under the new key: checkpoints, pending writes, "
            "records and step logs. Safe to interrupt and rerun, and to run while workers "
            "are live (restart them with the new ring first)."
        ),
    )
    rotate.add_argument("--url", required=True, help="the checkpointer URL")
    rotate.add_argument("--key-prefix", help="Redis key prefix the store was opened with")
    rotate.add_argument("--quiet", action="store_true", help="print only the summary")
    rotate.set_defaults(handler=_rotate)


def _generate(args: argparse.Namespace) -> int:
    print(KeyRing.generate_spec(args.key_id))
    return 0


def _rotate(args: argparse.Namespace) -> int:
    ring = KeyRing.from_env()
    if ring is None:
        raise MissingKeyError(
            f"`tether keys rotate` needs {ENV_KEYS}='<new id>:<key>,<old id>:<key>' "
            "(new key first; keep every old key until the rotation has finished)"
        )
    options: dict[str, Any] = {"encryption": ring}
    if args.key_prefix:
        options["key_prefix"] = args.key_prefix

    def progress(report: RotationReport) -> None:
        if not args.quiet:
            print(
                f"[{report.threads_done}/{report.threads_total}] thread {report.thread_id!r}: "
                f"{report.rewrapped} re-encrypted so far",
                file=sys.stderr,
            )

    async def run() -> tuple[RotationReport, ResealCounts | None]:
        async with open_checkpointer(args.url, **options) as saver:
            report = await rotate_keys(saver, progress=progress)
        return report, await _reseal_run_store(args.url, ring)

    report, runtime = asyncio.run(run())
    print(
        f"rotated {report.threads_done} thread(s) to key {report.active_key_id!r}: "
        f"{report.rewrapped} value(s) re-encrypted ({report.records} record(s), of which "
        f"{report.data_keys} thread data key(s), {report.steps} step(s)), "
        f"{report.current} already current"
        + (
            f", {report.plaintext} stored in clear (not encrypted by rotation; "
            "see docs/encryption.md, migration)"
            if report.plaintext
            else ""
        )
    )
    if runtime is not None:
        print(
            f"run store: {runtime.rewrapped} value(s) re-encrypted, {runtime.current} already "
            f"current, {runtime.plaintext} stored in clear"
        )
    return 0


async def _reseal_run_store(url: str, ring: KeyRing) -> ResealCounts | None:
    """Re-seal the runtime's tables too when the database holds them."""
    if not url.startswith(_RUN_STORES):
        return None
    async with open_run_store(url, encryption=ring) as store:
        if await store.schema_version() == 0:
            return None
        return await store.reseal()
