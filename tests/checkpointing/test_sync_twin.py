"""open_checkpointer_sync: the same savers, driven from sync code (scripts, notebooks)."""

from __future__ import annotations

import asyncio

from langgraph.types import Command

from tests.backends import Backend
from tests.checkpointing.gate_graph import build
from tether import open_checkpointer_sync


def _run_to_completion(backend: Backend, thread: str) -> dict[str, object]:
    with open_checkpointer_sync(backend.url, **backend.options) as saver:
        graph = build(saver)
        paused = graph.invoke({"items": []}, {"configurable": {"thread_id": thread}})
        assert "__interrupt__" in paused
        final: dict[str, object] = graph.invoke(
            Command(resume="sync"), {"configurable": {"thread_id": thread}}
        )
        assert len(list(saver.list({"configurable": {"thread_id": thread}}))) >= 4
        saver.copy_thread(thread, f"{thread}-copy")
        copied = graph.get_state({"configurable": {"thread_id": f"{thread}-copy"}})
        assert copied.values == final
        saver.prune([thread], strategy="keep_latest")
        assert len(list(saver.list({"configurable": {"thread_id": thread}}))) == 1
        saver.delete_thread(thread)
        assert saver.get_tuple({"configurable": {"thread_id": thread}}) is None
    return final


def test_sync_invoke_and_capabilities(backend: Backend) -> None:
    final = _run_to_completion(backend, "sync-thread")
    assert final["items"] == ["proposal-0", "done:sync"]


async def test_sync_twin_inside_a_running_event_loop(backend: Backend) -> None:
    """A notebook cell runs inside an event loop; the sync twin must still work there."""
    asyncio.get_running_loop()  # this test body runs on a loop, like Jupyter
    final = _run_to_completion(backend, "notebook-thread")
    assert final["decision"] == "sync"
