"""Command groups that several modules of this package add subcommands to."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["command_group"]


def command_group(subparsers: Any, name: str, help_text: str) -> Any:
    """The subcommands of group ``name`` (``tether NAME ACTION``), created by its first user.

    Modules register in name order, and any of them may add to a group (e.g.
    ``audit``); the first creates the group's parser, the others find it here.
    """
    parser = subparsers.choices.get(name)
    if parser is None:
        parser = subparsers.add_parser(name, help=help_text)
        parser.add_subparsers(dest=f"{name}_command", metavar="ACTION", required=True)
    for action in parser._actions:  # argparse keeps no public handle on a parser's subcommands
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise RuntimeError(f"the {name!r} command has no subcommands to add to")
