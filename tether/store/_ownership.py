"""Which run a record belongs to, and who to tell when records are deleted.

LangGraph stamps each checkpoint's metadata with ``run_id`` taken from the
run's config (``config["metadata"]["run_id"]``, else the configurable
``run_id``), and ``delete_for_runs`` deletes checkpoints by that stamp. Records
and steps carry the same stamp, read from the config of the node that writes
them, so deleting a run's checkpoints can delete what the run recorded too.

In-process caches derived from records (a run's budget ledger, for example)
register a listener here, so a deleted thread is not served from memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from langchain_core.runnables.config import var_child_runnable_config

__all__ = ["NO_RUN", "ambient_run_id", "forget", "on_forget", "resolve_run_id"]

_listeners: list[Callable[[frozenset[str] | None], None]] = []
_listeners_lock = threading.Lock()


def ambient_run_id() -> str | None:
    """The ``run_id`` of the LangGraph run whose node is calling, as its checkpoints record it."""
    config = var_child_runnable_config.get()
    if not config:
        return None
    for source in (config.get("metadata"), config.get("configurable")):
        if source and source.get("run_id") is not None:
            return str(source["run_id"])
    return None


# Pass as ``run_id`` for a record that belongs to no run even when written from
# inside one (a store-wide secret must not go with the run that created it).
NO_RUN = ""


def resolve_run_id(run_id: str | None) -> str | None:
    """``run_id`` if given, ``None`` for :data:`NO_RUN`, else the calling node's run."""
    if run_id is None:
        return ambient_run_id()
    return str(run_id) or None


def on_forget(listener: Callable[[frozenset[str] | None], None]) -> None:
    """Call ``listener(thread_ids)`` whenever records are deleted.

    ``thread_ids`` is ``None`` when the deleted threads are not known (records
    deleted by run): the listener should then drop everything it caches.
    """
    with _listeners_lock:
        _listeners.append(listener)


def forget(thread_ids: Iterable[str] | None) -> None:
    """Tell every listener that records of ``thread_ids`` (or of unknown threads) are gone."""
    threads = None if thread_ids is None else frozenset(thread_ids)
    with _listeners_lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(threads)
