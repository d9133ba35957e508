"""Stopping a cancelled run's node where it is, as LangGraph's server does.

A cancel (``runs.cancel``, or a ``multitask_strategy`` of ``interrupt`` or
``rollback``) is first taken at the run's next boundary: a step, a model call,
a tool effect. A node that reaches none (an LLM call that takes a minute, a
``sleep``) would keep the run, and the thread, busy until it returned, and its
writes would be kept. :func:`cancel_watchdog` cancels the block instead when the
run has not stopped :data:`CANCEL_GRACE` seconds after the cancel was
requested. What the node did not write is not kept; a durable tool stopped
mid-effect keeps its claim, which is what a crash there leaves too.

A sync node runs on a thread, which cannot be stopped: the run ends at once,
and the thread's next boundary (a recorded call, a durable tool) stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from tether.boundaries import RunCancelledError

if TYPE_CHECKING:
    from tether.runtime.context import RunContext

__all__ = ["CANCEL_GRACE", "cancel_watchdog"]

CANCEL_GRACE = 0.5
"""Seconds a cancelled run has to reach a boundary before its running node is cancelled."""


@asynccontextmanager
async def cancel_watchdog(ctx: RunContext, grace: float = CANCEL_GRACE) -> AsyncIterator[None]:
    """Cancel the block ``grace`` seconds after ``ctx``'s cancel is requested.

    Raises:
        RunCancelledError: The watchdog fired, with the cancel's action and reason.
    """
    loop = asyncio.get_running_loop()
    scope = asyncio.timeout(None)

    def arm() -> None:
        if scope.when() is None and not scope.expired():
            with contextlib.suppress(RuntimeError):  # the block has ended already
                scope.reschedule(loop.time() + grace)

    def tell() -> None:  # the heartbeat may learn of the cancel on another thread
        loop.call_soon_threadsafe(arm)

    ctx.on_cancel = tell
    try:
        async with scope:
            if ctx.cancel is not None:
                arm()
            yield
    except TimeoutError:
        if not scope.expired() or ctx.cancel is None:
            raise  # the graph's own TimeoutError
        action, reason = ctx.cancel
        raise RunCancelledError(action, reason) from None  # type: ignore[arg-type]
    finally:
        ctx.on_cancel = None
