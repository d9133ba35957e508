"""The ``tether`` command line.

Each subcommand lives in its own module in this package and exposes
``register(subparsers)``, which adds its parser and sets ``handler`` (a function
taking the parsed ``argparse.Namespace`` and returning the exit code). New
commands are found by scanning the package, so adding one touches no other file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence

from tether._version import __version__
from tether.errors import TetherError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tether", description="A durable runtime for long-running LangGraph agents."
    )
    parser.add_argument("--version", action="version", version=f"tether {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tether`` command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        code: int = handler(args)
    except TetherError as exc:
        print(f"tether: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tether: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`tether runs events RUN | head`): stop quietly, as
        # Unix tools do, and keep Python from complaining when it flushes stdout.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code
