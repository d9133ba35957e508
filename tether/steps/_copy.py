"""Copying a thread's recorded steps into another thread: what a fork keeps.

A record's key starts with its thread (``thread|namespace|task|call``, see
:meth:`NodeScope.step_key`), and with encryption on it is bound to that thread,
so a record cannot simply be pointed at from another thread. A fork that copies
its parent's checkpoints keeps their ids, and LangGraph derives a task's id from
its checkpoint's id: the forked thread's tasks have the same ids as the
parent's. Rewriting the key's thread part is all it takes for the fork to find
the parent's records and replay them instead of asking the model again.

Each copied record is written with its step-log entry, in one transaction, as
a recorded call writes them; steps without a record (approval audits) are
appended as they are. Durable tools derive their idempotency key from the
thread, so a call the fork makes afresh gets a new key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.steps._codec import encode_output
from tether.steps._errors import StepsError
from tether.steps._io import Flow, run, run_sync
from tether.store import Record, store_for
from tether.store import operations as ops

__all__ = ["copy_for_replay", "copy_steps", "copy_steps_sync", "moved_key", "on_replay_copy"]

ReplayCopier = Callable[[BaseCheckpointSaver[Any], str, str, frozenset[str]], Awaitable[object]]
_replay_copiers: list[ReplayCopier] = []


def on_replay_copy(copier: ReplayCopier) -> None:
    """Run ``copier(checkpointer, source, target, task_ids)`` whenever a replay copies a
    super-step of ``source`` into its scratch thread ``target``.

    For the layers above the steps: a record they keep per thread, which a
    task of the super-step reads again (an approval's decision), is copied by
    them (:func:`tether.approvals.copy_settled`). A fork calls none of them: it
    is a new run, and asks again.
    """
    if copier not in _replay_copiers:
        _replay_copiers.append(copier)


async def copy_for_replay(
    checkpointer: BaseCheckpointSaver[Any], source: str, target: str, task_ids: Collection[str]
) -> None:
    """Everything the layers registered with :func:`on_replay_copy` copy for ``task_ids``."""
    for copier in list(_replay_copiers):
        await copier(checkpointer, source, target, frozenset(task_ids))


def moved_key(key: str, source_thread: str, target_thread: str) -> str:
    """``key`` (a record key of ``source_thread``) as the same step's key in ``target_thread``."""
    prefix = f"{source_thread}|"
    if not key.startswith(prefix):
        return key  # not keyed by thread (an approval id): the same key names it
    return f"{target_thread}|{key[len(prefix) :]}"


def _copy(
    source: str, target: str, indexes: Collection[int], outputs: Mapping[int, Any]
) -> Flow[dict[int, int]]:
    unknown = sorted(set(outputs) - set(indexes))
    if unknown:
        raise StepsError(f"cannot replace steps {unknown}: they are not among the steps copied")
    docs: list[tuple[int, dict[str, Any]]] = yield ops.IndexedSteps(source)
    copied: dict[int, int] = {}
    for index, doc in docs:
        if index not in indexes:
            continue
        new = {**doc, "detail": {**(doc.get("detail") or {}), "copied_from": [source, index]}}
        ref = doc.get("output_ref")
        if not ref:
            copied[index] = yield ops.AppendStep(target, new)
            continue
        kind, key = ref[0], ref[1]
        record: Record | None = yield ops.Get(kind, key)
        if record is None:
            continue  # its thread was forgotten in between: nothing to replay
        value = dict(record.value)
        if index in outputs:
            value["output"] = encode_output(outputs[index])
            new["detail"]["replaced"] = True
        new_key = moved_key(key, source, target)
        new["output_ref"], new["key"] = [kind, new_key], new_key
        at = yield ops.PutWithStep(kind, new_key, value, target, new, replace=True)
        if at is not None:
            copied[index] = at
    return copied


async def copy_steps(
    checkpointer: BaseCheckpointSaver[Any],
    source_thread: str,
    target_thread: str,
    indexes: Collection[int],
    *,
    outputs: Mapping[int, Any] | None = None,
) -> dict[int, int]:
    """Copy steps (with their records) from one thread's log to another's.

    Args:
        checkpointer: The checkpointer both threads live on (any backend,
            encrypted or not: records are re-encrypted for the target thread).
        source_thread: The thread to copy from.
        target_thread: The thread to copy into (a fork whose checkpoints keep
            the source's ids, so its tasks find the copied records).
        indexes: The step indexes to copy, as :func:`read_steps` numbers them.
        outputs: New outputs for some of the copied model or tool steps, by
            index (a message, a pydantic model or JSON): the target replays
            these instead of the recorded ones.

    Returns:
        The new index of each copied step, by its index in the source.

    Raises:
        StepsError: ``outputs`` names a step that is not copied.
    """
    flow = _copy(str(source_thread), str(target_thread), set(indexes), dict(outputs or {}))
    return await run(flow, store_for(checkpointer))


def copy_steps_sync(
    checkpointer: BaseCheckpointSaver[Any],
    source_thread: str,
    target_thread: str,
    indexes: Collection[int],
    *,
    outputs: Mapping[int, Any] | None = None,
) -> dict[int, int]:
    """Sync twin of :func:`copy_steps` (not from the checkpointer's own event loop)."""
    flow = _copy(str(source_thread), str(target_thread), set(indexes), dict(outputs or {}))
    return run_sync(flow, store_for(checkpointer))
