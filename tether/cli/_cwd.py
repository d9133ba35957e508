"""The current directory on ``sys.path``, for modules a command names by import path."""

from __future__ import annotations

import os
import sys

__all__ = ["cwd_first_on_sys_path"]


def cwd_first_on_sys_path() -> None:
    """Put the current directory first on ``sys.path``, as ``python -m`` does.

    ``--graph myapp.graph:build`` and ``tether crashtest mytarget:crash_target``
    are then found from the project folder: the installed ``tether`` script
    puts its own folder there, not the current one.
    """
    cwd = os.getcwd()
    if sys.path[:1] not in ([cwd], [""]):
        sys.path.insert(0, cwd)
