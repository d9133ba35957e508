"""Appending a step whose stored text is bound to its index, in one write that may miss.

An encrypted step is sealed for the index it will have, so a driver that
assigns the index inside its write (a Redis script, a PostgreSQL function)
needs the index before the write. :class:`IndexGuesses` guesses it (the index
after this process's last append to the thread, reserved so that concurrent
appends of this process guess distinct indexes); the write refuses a guess the
log has moved past and answers the next free index, and the step is sealed for
that one and written again. Usually the first guess is right: one round trip.

A write is ``write(index, text) -> (status, index)``: ``index`` is ``"next"``
(a text that does not depend on it: the write picks the next index) or the
guessed index; ``status`` is one of :data:`WRITTEN`, :data:`EXISTED` (the
record was there and nothing was written) or :data:`TAKEN` (the guess was
stale; ``index`` is then the log's next index).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tether.store._types import RecordStoreError, StepPayload

__all__ = ["EXISTED", "TAKEN", "WRITTEN", "IndexGuesses", "StepWrite"]

WRITTEN, EXISTED, TAKEN = 1, 0, 2
_GUESSES = 4096  # threads whose next step index is remembered
_TRIES = 50

StepWrite = Callable[[str, str], Awaitable[tuple[int, int]]]


class IndexGuesses:
    """The index this process's next step of each thread will try."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    async def write(self, thread: str, step: StepPayload, write: StepWrite) -> tuple[int, int]:
        """Run ``write(index, text)`` until the step lands (once, unless its index was taken)."""
        if step.fixed is not None:
            return await write("next", step.fixed)
        floor = 0
        for _ in range(_TRIES):
            guess = self._reserve(thread, floor)
            status, index = await write(str(guess), step.encode(guess))
            if status == EXISTED and self._next.get(thread) == guess + 1:
                self._next[thread] = guess  # unused: the next append takes it
            if status != TAKEN:
                return status, index
            if index < guess:  # the log is shorter than remembered (the thread was deleted)
                self._next.pop(thread, None)
            floor = index  # seal for the log's next index
        raise RecordStoreError(
            f"could not append to the step log of thread {thread!r}: its next index was "
            f"taken {_TRIES} times in a row by other writers"
        )

    def forget(self, thread: str) -> None:
        """The thread's log was deleted: its next append guesses index 0 again."""
        self._next.pop(thread, None)

    def _reserve(self, thread: str, floor: int) -> int:
        """An index no other append of this process tries, at least ``floor``."""
        index = max(self._next.pop(thread, 0), floor)
        if len(self._next) >= _GUESSES:
            self._next.pop(next(iter(self._next)))
        self._next[thread] = index + 1
        return index
