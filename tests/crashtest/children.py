"""Tiny child-process bodies for the launcher tests; importing this module is cheap."""

from __future__ import annotations

import os
import signal
import time

__all__ = ["end_as", "sleep_long"]


def end_as(kind: int) -> None:
    """End the process: ``0`` kills it with SIGKILL, ``1`` exits cleanly, ``2`` exits with 3."""
    if kind == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == 2:
        raise SystemExit(3)


def sleep_long() -> None:
    """Outlive any timeout a test gives it."""
    time.sleep(600)
