"""``forget_thread``: drop what this process caches about a thread, so it reads the truth again.

The step layer keeps three per-thread caches, each read from the records once
per process so that a step costs no extra round trip:

* the keys of the thread's model and tool records (:mod:`.known`);
* the budget ledger of the run rooted at the thread (:mod:`.budget`);
* the fact that the thread's version pins were recorded or compared (:mod:`.versions`).

They hold only while this process is the only one running the thread. A worker
that claims a thread another process ran in the meantime must forget them
first: a stale key set would ask the model again for a step another worker
already recorded (and then lose to the stored answer), a stale ledger would miss
the other worker's spend, and a stale pin check would miss a version change. The
same call when a run ends frees the memory. Each cache is also bounded (1,024
least recently used entries), so a long-lived process stays small however many
threads it sees.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.steps import _budget, _known, _versions

__all__ = ["forget_thread"]


def forget_thread(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> None:
    """Drop this process's cached record keys, budget ledger and pin checks of ``thread_id``.

    The next recorded step of the thread reads them from the records again.
    Every layer over a backend (encryption, the runtime's fencing) has a record
    store of its own, so the thread's entries are dropped whichever layer read
    them; a budget shared through ``tether_root_thread_id`` is dropped by
    forgetting that root thread.

    Args:
        checkpointer: The checkpointer the thread's graph runs with.
        thread_id: The thread.

    Raises:
        TypeError: ``checkpointer`` is not a checkpointer, or ``thread_id`` is
            not a non-empty string.
    """
    if not isinstance(checkpointer, BaseCheckpointSaver):
        raise TypeError(
            f"forget_thread(checkpointer, thread_id) needs a checkpointer first, got "
            f"{type(checkpointer).__name__}"
        )
    if not isinstance(thread_id, str) or not thread_id:
        raise TypeError(f"forget_thread needs the thread id as a non-empty str, got {thread_id!r}")
    _known.drop_thread(thread_id)
    _budget.drop_thread(thread_id)
    _versions.drop_thread(thread_id)
