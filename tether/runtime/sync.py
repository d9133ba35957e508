"""``SyncRuntime``: the :class:`~tether.runtime.api.Runtime` for code that is not async.

Every call is the async :class:`Runtime` method of the same name, run on an
event loop this object owns in a background thread; nothing is written twice::

    with SyncRuntime("sqlite:///app.db", graphs=["refund"]) as rt:
        run = rt.create("refund", thread_id="ticket-42", input={"messages": [...]})
        for event in rt.follow(run.run_id):
            print(event.seq, event.kind)

The loop thread starts on ``__enter__`` (or :meth:`SyncRuntime.open`) and stops
on ``__exit__`` (or :meth:`SyncRuntime.close`). A call made from inside that
loop (a callback of the runtime itself) would deadlock and raises instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

from tether._loops import LoopThread, wait_on_loop
from tether.runtime.api import Runtime
from tether.runtime.models import RunEvent

__all__ = ["SyncRuntime"]

P = ParamSpec("P")
T = TypeVar("T")

_DEADLOCK = (
    "a SyncRuntime method was called from the runtime's own event loop, which would "
    "deadlock; use the async Runtime there"
)


def _blocking(
    method: Callable[Concatenate[Runtime, P], Awaitable[T]],
) -> Callable[Concatenate[SyncRuntime, P], T]:
    """The sync twin of one async ``Runtime`` method: same name, arguments and result."""

    def call(self: SyncRuntime, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._call(method(self.runtime, *args, **kwargs))

    call.__name__ = method.__name__
    call.__qualname__ = f"SyncRuntime.{method.__name__}"
    call.__doc__ = method.__doc__
    return call


class SyncRuntime:
    """The runs of one run store, for sync code (see :class:`Runtime` for every argument)."""

    def __init__(self, url: str, **options: Any) -> None:
        self.runtime = Runtime(url, **options)
        self._thread: LoopThread | None = None
        self._parent: SyncRuntime | None = None

    def scoped(self, tenant: str) -> SyncRuntime:
        """The same open runtime acting for ``tenant`` (closing it closes nothing)."""
        other = SyncRuntime.__new__(SyncRuntime)
        other.runtime = self.runtime.scoped(tenant)
        other._thread = None
        other._parent = self._parent or self
        return other

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> SyncRuntime:
        if self._parent is not None:
            raise RuntimeError("a scoped SyncRuntime is opened and closed by the one it came from")
        if self._thread is not None:
            raise RuntimeError("this SyncRuntime is already open")
        thread = LoopThread("tether-runtime")
        try:
            thread.call(self.runtime.__aenter__())
        except BaseException:
            thread.close()
            raise
        self._thread = thread
        return self

    def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            try:
                thread.call(self.runtime.aclose())
            finally:
                thread.close()

    def __enter__(self) -> SyncRuntime:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coro: Awaitable[T]) -> T:
        thread = (self._parent or self)._thread
        if thread is None:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise RuntimeError("the SyncRuntime is not open: use `with SyncRuntime(url) as rt:`")

        async def run() -> T:
            return await coro

        return wait_on_loop(run(), thread.loop, deadlock_message=_DEADLOCK)

    # -- the Runtime's calls ----------------------------------------------------------------

    create_thread = _blocking(Runtime.create_thread)
    get_thread = _blocking(Runtime.get_thread)
    create = _blocking(Runtime.create)
    get = _blocking(Runtime.get)
    list = _blocking(Runtime.list)
    wait = _blocking(Runtime.wait)
    cancel = _blocking(Runtime.cancel)
    resume = _blocking(Runtime.resume)
    decide = _blocking(Runtime.decide)
    events = _blocking(Runtime.events)
    create_cron = _blocking(Runtime.create_cron)
    get_cron = _blocking(Runtime.get_cron)
    list_crons = _blocking(Runtime.list_crons)
    update_cron = _blocking(Runtime.update_cron)
    delete_cron = _blocking(Runtime.delete_cron)

    def follow(
        self, run_id: str, *, after: int = 0, kinds: Collection[str] | None = None
    ) -> Iterator[RunEvent]:
        """Every event of the run from ``after`` on, live, until the run stops."""
        events: AsyncIterator[RunEvent] = self.runtime.follow(run_id, after=after, kinds=kinds)
        try:
            while True:
                try:
                    yield self._call(anext(events))
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None and (self._parent or self)._thread is not None:
                self._call(aclose())
