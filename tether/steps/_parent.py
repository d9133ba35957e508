"""A task's step keys name its task id, which LangGraph derives from the checkpoint
the task runs from. A resumed run finds the same records only if that checkpoint
was saved. With ``durability="sync"`` it always is before the task starts; with
``"async"`` it is being saved while the task starts, so before the first model
call or tool effect of a task, tether waits until it is stored. (With ``"exit"``
nothing is saved until the run ends; see docs/steps.md.)

The wait is a flow (:mod:`._io`), part of the protocols of recorded model
calls and durable tools, sync or async.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from tether._instances import instance_key
from tether.steps._errors import StepsError
from tether.steps._io import Await, Flow, Sleep
from tether.steps._scope import NodeScope

__all__ = ["wait_for_parent_checkpoint"]

_TIMEOUT_S = 30.0
_seen: OrderedDict[tuple[int, str, str, str], None] = OrderedDict()
_lock = threading.Lock()


def wait_for_parent_checkpoint(scope: NodeScope) -> Flow[None]:
    """Return once the checkpoint the task runs from is stored (``async`` durability)."""
    checkpoint_id = scope.parent_checkpoint_id
    if scope.durability != "async" or not checkpoint_id or not scope.store.durable:
        return  # (in memory, nothing survives a crash to be replayed)
    slot = (instance_key(scope.checkpointer), scope.thread_id, scope.graph_ns, checkpoint_id)
    with _lock:
        if slot in _seen:
            return
    config: Any = {
        "configurable": {
            "thread_id": scope.thread_id,
            "checkpoint_ns": scope.graph_ns,
            "checkpoint_id": checkpoint_id,
        }
    }
    store, saver = scope.store, scope.checkpointer
    delay, waited = 0.0005, 0.0
    # Read on the store's loop, which is the checkpointer's.
    while (yield Await(lambda: store.call(saver.aget_tuple(config)))) is None:
        if waited >= _TIMEOUT_S:
            raise StepsError(
                f"checkpoint {checkpoint_id} of thread {scope.thread_id!r} was not saved within "
                f"{_TIMEOUT_S:.0f} s, so a crash now could not be replayed; check the "
                "checkpointer's health, or run with durability='sync'"
            )
        yield Sleep(delay)
        waited += delay
        delay = min(delay * 2, 0.25)
    with _lock:
        _seen[slot] = None
        if len(_seen) > 4096:
            _seen.popitem(last=False)
