"""Waiting, from sync code, for a coroutine that must run on a particular event loop.

Async savers and the record store live on one event loop; their sync twins hand
each coroutine to that loop and wait. Doing so from the loop's own thread would
deadlock, so that case raises instead, with a message that says what to use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["wait_on_loop"]

T = TypeVar("T")


def wait_on_loop(
    coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop, *, deadlock_message: str
) -> T:
    """Run ``coro`` on ``loop`` (which runs in another thread) and return its result.

    Raises:
        asyncio.InvalidStateError: Called from ``loop``'s own thread, where waiting
            would deadlock; ``deadlock_message`` says what to do instead.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise asyncio.InvalidStateError(deadlock_message)
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
