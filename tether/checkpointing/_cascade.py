"""Deleting checkpoints deletes what tether recorded beside them.

Every backend saver calls these after its own delete, so ``delete_thread``,
``delete_for_runs`` and ``prune(strategy="delete")`` also remove the thread's
(or the runs') model outputs, tool results, intent records, approvals and step
log, and tell in-process caches to forget them.

Checkpoints go first and records second. A crash in between leaves records
without checkpoints, which the next delete of the same thread removes (both
steps are idempotent). The other order could leave a resumable run whose
recorded answers and tool claims are gone, and resuming it would ask the model
again and repeat tool effects. With a data-key store (``data_keys_url``) the
thread's data key is deleted there last, after its records.

The deleting methods take collections of ids; :func:`check_ids` is the one
check of those arguments, called once by each public method before anything
is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.errors import TetherError

__all__ = [
    "IdArgumentError",
    "check_ids",
    "check_run_ids",
    "check_thread_ids",
    "delete_records_of_runs",
    "delete_records_of_threads",
]


class IdArgumentError(TetherError, TypeError):
    """A method that takes a collection of ids got one string, or no collection at all."""


def check_ids(ids: Iterable[str], *, argument: str, caller: str) -> list[str]:
    """``ids`` as a list of str, refusing a bare string: the one check of id collections.

    A bare ``"abc"`` iterates as the ids ``a``, ``b`` and ``c`` (and ``b"abc"``
    as ``97``, ``98`` and ``99``); deleting or pruning those would be silent
    data loss. Every public method that takes a collection of run or thread ids
    (the savers' ``delete_for_runs`` and ``prune``, the record store's
    ``delete_runs``) calls this once, before anything is touched, so every
    backend refuses the same input with the same error.

    Args:
        ids: What the caller passed.
        argument: The parameter's name, e.g. ``"run_ids"``.
        caller: The public method's name, e.g. ``"delete_for_runs"``.

    Raises:
        IdArgumentError: ``ids`` is a str or bytes, or not iterable.
    """
    what = argument.removesuffix("_ids").replace("_", " ")
    if isinstance(ids, str | bytes | bytearray):
        raise IdArgumentError(
            f"{caller}() argument {argument} takes a collection of {what} ids, not a single "
            f"string ({ids!r}); pass [{ids!r}]"
        )
    try:
        return [str(i) for i in ids]
    except TypeError:
        raise IdArgumentError(
            f"{caller}() argument {argument} takes a collection of {what} ids, "
            f"not {type(ids).__name__}"
        ) from None


def check_run_ids(run_ids: Iterable[str], caller: str = "delete_for_runs") -> list[str]:
    """:func:`check_ids` for the ``run_ids`` argument of ``caller``."""
    return check_ids(run_ids, argument="run_ids", caller=caller)


def check_thread_ids(thread_ids: Iterable[str], caller: str = "prune") -> list[str]:
    """:func:`check_ids` for the ``thread_ids`` argument of ``caller``."""
    return check_ids(thread_ids, argument="thread_ids", caller=caller)


async def delete_records_of_threads(
    saver: BaseCheckpointSaver[Any], thread_ids: Iterable[str]
) -> None:
    """Delete tether's records and step log of each thread (after its checkpoints)."""
    from tether.store import store_for  # the store layer sits above the savers

    store = store_for(saver)
    for thread_id in thread_ids:
        await store.delete_thread(str(thread_id))


async def delete_records_of_runs(saver: BaseCheckpointSaver[Any], run_ids: list[str]) -> None:
    """Delete tether's records and steps written by the runs (after their checkpoints)."""
    from tether.store import store_for

    if run_ids:
        await store_for(saver).delete_runs(run_ids)
