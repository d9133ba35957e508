"""What a recorded model or durable tool writes in a sync node carries the node's run id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from tests.backends import Backend
from tests.steps.graphs import State, one_node
from tests.steps.scripted import CountingScriptedModel, reply
from tether import open_checkpointer_sync
from tether.steps import durable_tool, recorded
from tether.store import store_for


def test_a_sync_node_stamps_its_records_with_its_run(
    durable_backend: Backend, tmp_path: Path
) -> None:
    model = recorded(
        CountingScriptedModel(replies=[reply("hi")], calls_file=str(tmp_path / "calls"))
    )

    @durable_tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"{order}: shipped"

    def node(state: State) -> dict[str, Any]:
        answer = model.invoke(state["messages"])
        lookup.invoke({"order": "A1"})
        return {"messages": [answer]}

    config: Any = {"configurable": {"thread_id": "t1"}, "metadata": {"run_id": "run-s"}}
    with open_checkpointer_sync(durable_backend.url, **durable_backend.options) as saver:
        one_node(node, saver).invoke({"messages": [HumanMessage("hi")]}, config)
        store = store_for(saver)
        records = store.sync.list("model", thread_id="t1") + store.sync.list("tool", thread_id="t1")
        assert [(r.kind, r.run_id) for r in records] == [("model", "run-s"), ("tool", "run-s")]
        # So deleting the run's checkpoints deletes what it recorded.
        saver.delete_for_runs(["run-s"])
        assert store.sync.list("model", thread_id="t1") == []
        assert store.sync.list("tool", thread_id="t1") == []
        assert store.sync.steps("t1") == []
