"""``open_checkpointer_sync``: the sync twin of ``open_checkpointer`` for scripts and notebooks.

The async saver lives on an event loop in a private background thread. Its
sync methods (what ``graph.invoke`` and ``graph.get_state`` call) hand each
operation to that loop, so there is one implementation of every storage
operation, and sync code works even where an event loop is already running
(Jupyter).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether._loops import LoopThread
from tether.checkpointing._opener import open_checkpointer

__all__ = ["open_checkpointer_sync"]


@contextmanager
def open_checkpointer_sync(url: str, **options: Any) -> Iterator[BaseCheckpointSaver[Any]]:
    """Open the checkpointer ``url`` names for use from synchronous code.

    Takes the same arguments and raises the same errors as
    :func:`tether.open_checkpointer`. Do not call the saver's sync methods from
    the saver's own loop; from ``async`` code use ``open_checkpointer`` instead.
    """
    runner = LoopThread("tether-checkpointer")
    try:
        manager: AbstractAsyncContextManager[BaseCheckpointSaver[Any]] = open_checkpointer(
            url, **options
        )
        saver = runner.call(manager.__aenter__())
        try:
            yield saver
        except BaseException as exc:
            if not runner.call(manager.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            runner.call(manager.__aexit__(None, None, None))
    finally:
        runner.close()
