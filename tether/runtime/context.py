"""What a worker knows about one run it holds: the lease, stop requests, buffered events.

:class:`RunContext` is the :class:`tether.boundaries.RunGuard` a worker lends
the layers below it while one run executes. Its :meth:`~RunContext.check` does
no I/O: it compares the monotonic clock with the lease's local deadline and
looks at flags the heartbeat and the control channel set. That is enough before
an effect, because the local deadline is taken from the moment a heartbeat was
*sent* (before the database extended the lease), minus a margin; and the
monotonic clock keeps counting while a process is stopped, so a worker paused
past its lease finds itself lost at its very next boundary.

The same check stops a run past its deadline, and (with a step timeout) a step
of a sync node that ran too long, before its next model call or tool effect
(:mod:`tether.runtime._timeouts`). A boundary's detail becomes a run event:
``model.after`` is ``model.step``, ``tool.after`` is ``tool.effect``.

:class:`EventBuffer` collects the run's events (sync, thread-safe, so sync nodes
may add to it) until the worker flushes them in one fenced batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tether.boundaries import (
    Fence,
    LeaseLostError,
    RunCancelledError,
    RunHandedBackError,
    RunTimedOutError,
    StepTimeoutError,
)
from tether.runtime._timeouts import Attempt, current_attempt

__all__ = ["BufferedEvent", "EventBuffer", "RunContext"]

log = logging.getLogger("tether.runtime")

# Boundaries at which a run may be stopped: between supersteps, and before any
# model call or tool effect. After an effect ("tool.after") the run must go on
# to record it, so nothing but a lost lease stops it there.
_STOPPING = frozenset({"step", "model.before", "tool.before", "tool.claim"})
# Boundaries inside a task, where a step that ran too long stops (design §3.8).
_STEP_TIMED = frozenset({"model.before", "tool.before", "tool.claim"})
# The event a boundary's detail becomes (design §3.11); others keep their name.
_EVENT_KINDS = {"model.after": "model.step", "tool.after": "tool.effect"}
_ATTEMPTS_KEPT = 1024


@dataclass(frozen=True)
class BufferedEvent:
    """One event waiting to be written: its kind, namespace and JSON-able data."""

    kind: str
    data: Any
    ns: str = ""


class EventBuffer:
    """Events of one run not yet written, in the order they happened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[BufferedEvent] = []
        self._first_at: float | None = None
        self.wake: Callable[[], None] | None = None

    def add(self, kind: str, data: Any, ns: str = "") -> None:
        with self._lock:
            if not self._pending:
                self._first_at = time.monotonic()
            self._pending.append(BufferedEvent(kind, data, ns))
        if self.wake is not None:
            self.wake()

    def take(self) -> list[BufferedEvent]:
        """Everything buffered, oldest first; the buffer is empty afterwards."""
        with self._lock:
            taken, self._pending, self._first_at = self._pending, [], None
        return taken

    def put_back(self, batch: list[BufferedEvent]) -> None:
        """Return a batch that could not be written, ahead of anything added since."""
        with self._lock:
            self._pending[:0] = batch
            if self._first_at is None:
                self._first_at = time.monotonic()

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def age(self) -> float:
        """Seconds since the oldest unflushed event was added (0 when empty)."""
        with self._lock:
            return 0.0 if self._first_at is None else time.monotonic() - self._first_at


class RunContext:
    """The guard of one held run (implements :class:`tether.boundaries.RunGuard`)."""

    def __init__(
        self,
        *,
        fence: Fence,
        tenant: str,
        worker_id: str,
        lease: float,
        margin: float,
        confirmed_at: float,
        same_database: bool,
        verifier: Callable[[Fence], Awaitable[bool]],
        deadline: float | None = None,
        step_timeout: float | None = None,
    ) -> None:
        self.fence = fence
        self.tenant = tenant
        self.worker_id = worker_id
        self.same_database = same_database
        self.lease = lease
        self.margin = margin
        self.valid_until = confirmed_at + lease - margin
        self.deadline = deadline  # monotonic, or None
        self.step_timeout = step_timeout
        # Root-graph nodes LangGraph times itself (a TimeoutPolicy): not timed at boundaries.
        self.timed_nodes: frozenset[str] = frozenset()
        self.stopped_at: str | None = None  # where the deadline stopped the run
        self._retries: OrderedDict[tuple[str, int], float] = OrderedDict()
        self.lost = False
        self.cancel: tuple[str, str] | None = None  # (action, reason)
        self.on_cancel: Callable[[], None] | None = None  # told once, when a cancel comes
        self.draining = False
        self.events = EventBuffer()
        self._verifier = verifier

    def confirm(self, sent_at: float) -> None:
        """A heartbeat sent at monotonic ``sent_at`` was confirmed for this run."""
        self.valid_until = max(self.valid_until, sent_at + self.lease - self.margin)

    def request_cancel(self, action: str, reason: str) -> None:
        if self.cancel is None:
            self.cancel = (action, reason)
            log.info("run %s: cancel requested (%s)", self.fence.run_id, action)
            if self.on_cancel is not None:
                self.on_cancel()

    def check(self, boundary: str) -> None:
        """Raise the reason this run must stop at ``boundary``, if there is one. No I/O."""
        if self.lost or time.monotonic() > self.valid_until:
            self.lost = True
            raise LeaseLostError(
                f"run {self.fence.run_id}: this worker's lease (fence {self.fence.token}) "
                "is no longer valid; another worker may hold the run"
            )
        if boundary not in _STOPPING:
            return
        if self.cancel is not None:
            action, reason = self.cancel
            raise RunCancelledError(action, reason)  # type: ignore[arg-type]
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.stopped_at = boundary
            raise RunTimedOutError(
                f"run {self.fence.run_id} passed its deadline; stopped at {boundary!r}"
            )
        if self.draining and boundary == "step":
            raise RunHandedBackError(f"run {self.fence.run_id} handed back: worker stopping")
        if self.step_timeout is not None and boundary in _STEP_TIMED:
            self._check_step_time(boundary, self.step_timeout)

    def _check_step_time(self, boundary: str, seconds: float) -> None:
        """Raise :class:`StepTimeoutError` if the running attempt took longer than ``seconds``."""
        attempt = current_attempt()
        if attempt is None or (not attempt.nested and attempt.node in self.timed_nodes):
            return
        took = self._elapsed(attempt)
        if took is None or took <= seconds:
            return
        self.events.add(
            "step.timeout",
            {
                "node": attempt.node,
                "task_id": attempt.task_id,
                "attempt": attempt.number,
                "seconds": seconds,
                "boundary": boundary,
            },
        )
        raise StepTimeoutError(seconds, boundary)

    def _elapsed(self, attempt: Attempt) -> float | None:
        """How long ``attempt`` has run.

        The first attempt's start is LangGraph's; a retry's is not known, so its
        clock starts at its first boundary (it may run a little longer, never
        shorter, than the step timeout).
        """
        if attempt.number <= 1:
            if attempt.first_started is None:
                return None
            return time.time() - attempt.first_started
        key = (attempt.task_id, attempt.number)
        first_seen = self._retries.setdefault(key, time.monotonic())
        if len(self._retries) > _ATTEMPTS_KEPT:
            self._retries.popitem(last=False)
        return time.monotonic() - first_seen

    def note(self, kind: str, detail: Mapping[str, Any]) -> None:
        self.events.add(_EVENT_KINDS.get(kind, kind), dict(detail))

    async def verify(self) -> None:
        """One round trip: does the store still say this worker holds the run?"""
        if self.lost or not await self._verifier(self.fence):
            self.lost = True
            raise LeaseLostError(
                f"run {self.fence.run_id}: fence {self.fence.token} was taken over"
            )
