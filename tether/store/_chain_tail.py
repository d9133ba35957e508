"""Appending a chained step where the backend cannot hash: the link computed by the writer.

A Redis script has no SHA-256 (only ``redis.sha1hex``), so the writer
computes a step's link (:func:`~tether.store._chain.chain_link`) before the
write, from the index and head link it expects at the end of the thread's
log, and the script only compares: if the log's next index and head are the
ones the link was computed from, it writes the step, its link and the new
head; else it writes nothing and answers the log's actual next index and
head (compare-and-set). The writer then computes the link again over those,
and writes again. So concurrent appends (parallel nodes, several workers)
still form one line in index order, and a link always covers the head it
replaces.

:class:`ChainTails` keeps, per thread, the end of the log as this process
last saw it, so the first try is usually right: one round trip. The first
write of a thread this process has not written yet guesses an empty log
(index 0, :data:`~tether.store._chain.GENESIS`); on a thread with steps it
costs one more round trip, which then answers the log's end.

A write is ``write(index, head, text, link) -> (status, index, head)``:
``status`` is :data:`WRITTEN`, :data:`EXISTED` (the record was there and
nothing was written) or :data:`TAKEN` (the log's end moved; ``index`` and
``head`` are then its actual next index and head link).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from tether.store._chain import GENESIS, chain_link
from tether.store._step_index import EXISTED, TAKEN, WRITTEN
from tether.store._types import RecordStoreError, StepPayload

__all__ = ["EXISTED", "TAKEN", "WRITTEN", "ChainTails", "TailWrite"]

_THREADS = 4096  # threads whose log end is remembered
_TRIES = 50

TailWrite = Callable[[int, str, str, str], Awaitable[tuple[int, int, str]]]


class ChainTails:
    """The next index and head link of each thread's log, as this process last saw them."""

    def __init__(self) -> None:
        self._tails: OrderedDict[str, tuple[int, str]] = OrderedDict()
        self._lock = threading.Lock()

    def _get(self, thread: str) -> tuple[int, str]:
        with self._lock:
            return self._tails.get(thread, (0, GENESIS))

    def _set(self, thread: str, index: int, head: str) -> None:
        with self._lock:
            # Concurrent writes may answer out of order: a stale end costs one retry.
            self._tails[thread] = (index, head)
            self._tails.move_to_end(thread)
            while len(self._tails) > _THREADS:
                self._tails.popitem(last=False)

    def forget(self, thread: str) -> None:
        """Drop the thread's end (its log was deleted)."""
        with self._lock:
            self._tails.pop(thread, None)

    async def write(self, thread: str, step: StepPayload, write: TailWrite) -> tuple[int, int]:
        """Run ``write`` until the step lands; ``(status, index)`` (index -1 if it existed)."""
        index, head = self._get(thread)
        for _ in range(_TRIES):
            text = step.fixed if step.fixed is not None else step.encode(index)
            link = chain_link(head, index, step.digest)
            status, answered, current = await write(index, head, text, link)
            if status == WRITTEN:
                self._set(thread, index + 1, link)
                return status, index
            if status == EXISTED:
                return status, -1
            if status != TAKEN:
                raise RecordStoreError(f"unexpected answer {status!r} from a step write")
            index, head = answered, current
            self._set(thread, index, head)
        raise RecordStoreError(
            f"could not append to the step log of thread {thread!r}: its end moved "
            f"{_TRIES} times in a row under other writers"
        )
