"""Waiting, from sync code, for a coroutine that must run on a particular event loop.

Async savers and the record store live on one event loop; their sync twins hand
each coroutine to that loop and wait. Doing so from the loop's own thread would
deadlock, so that case raises instead, with a message that says what to use.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "shared_loop", "wait_on_loop"]

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


class LoopThread:
    """An event loop running forever in a daemon thread until :meth:`close`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


_shared: LoopThread | None = None
_shared_lock = threading.Lock()


def shared_loop() -> asyncio.AbstractEventLoop:
    """A process-wide background loop for sync calls into savers that have no loop.

    Started on first use and kept for the life of the process, so a sync call
    costs one hop to that thread rather than a new thread and event loop.
    """
    global _shared  # noqa: PLW0603 - one lazily started loop per process
    with _shared_lock:
        if _shared is None:
            _shared = LoopThread("tether-shared-loop")
        return _shared.loop
