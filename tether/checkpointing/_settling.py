"""Savers that settle the step layer's record writes in flight before their own writes.

See :mod:`tether._in_flight`: a task's pending writes wait for its record
writes, a checkpoint for every record write of its thread. A saver that does
both says so with ``settles_records``; only then does the step layer leave a
record write in flight.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig

from tether._in_flight import before_task_writes

__all__ = ["SettlesRecordWrites"]


class SettlesRecordWrites:
    """Mixin: ``aput_writes`` settles the task's record writes, then saves as the next class.

    The saver's ``aput`` must call :func:`tether._in_flight.before_checkpoint`
    itself (each tether saver has its own).
    """

    settles_records = True

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await before_task_writes(config, writes, task_id)
        await super().aput_writes(config, writes, task_id, task_path)  # type: ignore[misc]
