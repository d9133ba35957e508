"""Rows for where a run stopped: an interrupt waiting for an answer, a node that raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from tether import open_checkpointer
from tether.debug import timeline


class Ask(TypedDict, total=False):
    question: str
    answer: str


def _graph(saver: Any, *, fail: bool = False) -> Any:
    def ask(state: Ask) -> dict[str, Any]:
        return {"answer": interrupt({"question": "refund <4200> cents?"})}

    def finish(state: Ask) -> dict[str, Any]:
        if fail:
            raise RuntimeError("the mail server is down")
        return {}

    graph = StateGraph(Ask)
    graph.add_node("ask", ask)
    graph.add_node("finish", finish)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "finish")
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=saver)


async def test_an_interrupt_then_an_error(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "t"}}
    async with open_checkpointer(f"sqlite:///{tmp_path / 'runs.db'}") as saver:
        graph = _graph(saver, fail=True)
        await graph.ainvoke({"question": "?"}, config)
        waiting = await timeline(saver, "t", graph=graph)
        (row,) = waiting.entries
        assert (row.kind, row.node) == ("interrupt", "ask")
        assert "refund <4200> cents?" in row.summary
        assert "&lt;4200&gt;" in waiting._repr_html_()
        assert waiting.path().stopped_at == ("ask",)

        with pytest.raises(RuntimeError, match="mail server"):
            await graph.ainvoke(Command(resume="yes"), config)
        failed = await timeline(saver, "t", graph=graph)
        # The interrupt stays in the history, answered; the error follows it.
        kinds = [(e.kind, e.node) for e in failed.entries]
        assert kinds == [("interrupt", "ask"), ("error", "finish")]
        assert "the mail server is down" in failed.entries[1].summary
        assert failed.state()["answer"] == "yes"
        assert failed.path().visited == ("__start__", "ask")
        assert failed.path().stopped_at == ("finish",)
