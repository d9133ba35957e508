"""The event loop of tether's long-running processes: uvloop where it is installed.

``tether serve`` gets uvloop (and httptools' HTTP parser) through uvicorn's
``loop="auto"`` and ``http="auto"``; ``tether worker`` runs its loop here, so
both processes of a split deployment run on the same loop, the one LangGraph's
own server runs on. Without uvloop (Windows, or a platform it has no wheel for)
asyncio's loop runs everything the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "run"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` when uvloop can be imported, else ``None`` (asyncio's)."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, on the loop :func:`loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)
