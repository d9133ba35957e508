"""Sync entry points over async savers.

tether implements every storage operation once, as a coroutine. The sync
methods LangGraph calls from ``graph.invoke`` hand that coroutine to the
saver's event loop (``self.loop``) and wait for it, which is how the upstream
async savers bridge too. A sync call made on the loop's own thread would
deadlock, so it fails with a message saying what to use instead.

Listings are read whole before they are handed over (:func:`read_all`), and
every layer closes the listing beneath it as soon as it is done with it
(:func:`closing_listing`): a caller may stop iterating at any point, as
LangGraph's replay does, without leaving a lock or a pooled connection held.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from tether._loops import wait_on_loop

T = TypeVar("T")

__all__ = ["SyncBridge", "closing_listing", "read_all"]


@asynccontextmanager
async def closing_listing(listing: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """``listing``, closed on exit however the loop over it ended.

    ``async for`` does not close what it iterates when the loop body returns,
    breaks or raises, nor when the generator around it is closed: the listing
    stays suspended, holding whatever it holds, until the garbage collector
    finalizes it, possibly after its saver is closed. Like
    :func:`contextlib.aclosing`, but takes any async iterator and closes those
    that have an ``aclose``.
    """
    try:
        yield listing
    finally:
        aclose = getattr(listing, "aclose", None)
        if aclose is not None:
            await aclose()


async def read_all(listing: AsyncIterator[T]) -> list[T]:
    """Every item of ``listing``, which is closed before this returns or raises."""
    async with closing_listing(listing) as items:
        return [item async for item in items]


def _deadlock_message(saver: object, name: str) -> str:
    return (
        f"synchronous {type(saver).__name__}.{name}() was called from the saver's own "
        f"event loop, which would deadlock; await a{name}() instead, or use "
        "tether.open_checkpointer_sync() to get a saver for sync code"
    )


class SyncBridge:
    """Mixin giving an async saver sync twins of tether's extra capabilities."""

    # Set by the upstream async saver (at construction or in asetup()).
    loop: Any

    def _run_sync(self, coro: Coroutine[Any, Any, T], name: str) -> T:
        loop = self.loop
        if loop is None:
            coro.close()
            raise RuntimeError(
                f"{type(self).__name__}.{name}() was called before the saver was set up; "
                "open it with tether.open_checkpointer() or open_checkpointer_sync()"
            )
        return wait_on_loop(coro, loop, deadlock_message=_deadlock_message(self, name))

    def _bridged_list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Sync twin of ``alist`` (reads the whole page, then yields it).

        Reading the page whole on the saver's loop is what makes abandoning the
        returned iterator safe: upstream's sync ``list`` steps an ``alist``
        generator from the caller's thread, and when the caller stops early
        that generator is closed outside its loop, which fails and leaves the
        saver's lock (SQLite) or pooled connection (PostgreSQL) held for good.
        Not named ``list`` (it would shadow the builtin in the annotations
        below); each saver assigns ``list = SyncBridge._bridged_list``.
        """
        listing = self.alist(config, filter=filter, before=before, limit=limit)
        return iter(self._run_sync(read_all(listing), "list"))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        return self._run_sync(self.adelete_for_runs(run_ids), "delete_for_runs")

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        return self._run_sync(self.acopy_thread(source_thread_id, target_thread_id), "copy_thread")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        return self._run_sync(self.aprune(thread_ids, strategy=strategy), "prune")

    if TYPE_CHECKING:  # provided by the concrete saver; not defined here so that
        # LangGraph's capability detection only sees real implementations.
        def alist(
            self,
            config: RunnableConfig | None,
            *,
            filter: dict[str, Any] | None = None,
            before: RunnableConfig | None = None,
            limit: int | None = None,
        ) -> AsyncIterator[CheckpointTuple]: ...

        async def adelete_for_runs(self, run_ids: Sequence[str]) -> None: ...

        async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None: ...

        async def aprune(
            self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
        ) -> None: ...
