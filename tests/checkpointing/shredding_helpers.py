"""What the crypto-shredding tests share: a seeded thread, what reads of it return."""

from __future__ import annotations

from typing import Any

from tests.checkpointing.encryption_helpers import CANARY, build_graph, graph_config
from tests.checkpointing.encryption_helpers import graph_input as first_input
from tether.store import store_for

ERASED = r"data key 'd[0-9a-f]{16}', which this store does not hold: the thread was erased"
"""What ``ErasedDataKeyError`` says of a checkpoint of an erased thread."""


def conf(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


async def seed_thread(saver: Any, thread_id: str) -> None:
    """A paused run (checkpoints, pending writes), a record and a step."""
    await build_graph(saver).ainvoke(first_input(), graph_config(thread_id))
    store = store_for(saver)
    await store.insert("tool", f"{thread_id}|refund", {"card": CANARY}, thread_id=thread_id)
    await store.append_step(thread_id, {"kind": "tool", "output": CANARY})


async def reads_of(saver: Any, thread_id: str) -> list[Any]:
    """The thread's checkpoints' values, its record and its steps."""
    store = store_for(saver)
    return [
        [t.checkpoint["channel_values"] async for t in saver.alist(conf(thread_id))],
        await store.get("tool", f"{thread_id}|refund"),
        await store.steps(thread_id),
    ]
