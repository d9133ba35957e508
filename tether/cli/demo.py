"""``tether demo``: the one-command tour (no servers, no keys)."""

from __future__ import annotations

import argparse
import asyncio
import functools
from pathlib import Path
from typing import Any

__all__ = ["register"]


def _cmd_demo(args: argparse.Namespace) -> int:
    # Imported here so `tether --help` stays fast.
    from tether.demo import run_demo

    out = functools.partial(print, flush=True)
    return asyncio.run(run_demo(Path(args.dir), out))


def register(subparsers: Any) -> None:
    """Add ``tether demo``."""
    parser = subparsers.add_parser(
        "demo",
        help="run the refund agent, pause for approval, decide from another process",
        description=(
            "Runs the refund agent on an embedded SQLite database under DIR/demo (recreated "
            "each run): it pauses for a person's approval, a separate process edits the "
            "amount and resumes it, and the step log shows nothing was asked twice."
        ),
    )
    parser.add_argument(
        "--dir", default=".tether", help="folder for the demo's files (default .tether)"
    )
    parser.set_defaults(handler=_cmd_demo)
