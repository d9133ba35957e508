"""The timeline's rows, renderings, states and diffs, the path, and clear errors on bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from langchain_core.messages import AIMessage, ToolMessage

from tests.debug.refund import builder
from tether import open_checkpointer
from tether.debug import DebugError, timeline
from tether.graphs import build_refund_graph, refund_input

HOSTILE = "My order A-1001 <script>alert(1)</script> arrived broken. Please refund it."


@pytest.fixture
async def saver(tmp_path: Path) -> Any:
    async with open_checkpointer(f"sqlite:///{tmp_path / 'runs.db'}") as opened:
        graph = build_refund_graph(checkpointer=opened, workdir=tmp_path)
        await graph.ainvoke(refund_input(HOSTILE), {"configurable": {"thread_id": "t"}})
        yield opened


async def test_rows_join_the_log_and_the_checkpoints(saver: Any, tmp_path: Path) -> None:
    tl = await timeline(saver, "t", graph=builder(tmp_path))
    rows = [(e.step, e.kind, e.node) for e in tl.entries]
    assert rows == [
        (0, "model", "agent"),
        (1, "tool", "tools"),
        (2, "model", "agent"),
        (3, "tool", "tools"),
        (4, "model", "agent"),
        (5, "tool", "tools"),
        (6, "model", "agent"),
    ]
    assert [e.log_index for e in tl.entries] == [s.index for s in tl.steps]
    assert tl.entries[0].tokens > 0
    assert "lookup_order" in tl.entries[0].summary
    # Each step points at the checkpoint its task started from, in the line's order.
    order = [c.checkpoint_id for c in tl.checkpoints]
    starts = [order.index(e.checkpoint_id) for e in tl.entries if e.checkpoint_id]
    assert starts == sorted(starts)
    assert len(starts) == 7


async def test_renderings_escape_what_the_run_said(saver: Any, tmp_path: Path) -> None:
    tl = await timeline(saver, "t", graph=builder(tmp_path))
    state = tl.state(0)
    page = tl._repr_html_() + state._repr_html_() + tl.diff(0, 2)._repr_html_()
    assert "<script>" not in page
    assert "&lt;script&gt;" in state._repr_html_()
    assert page.count("<table") == 3
    text = str(tl)
    assert text.splitlines()[0].split() == [
        "step",
        "time",
        "kind",
        "node",
        "summary",
        "tokens",
        "cost_usd",
        "checkpoint",
    ]
    assert len(text.splitlines()) == 2 + len(tl)
    frame = tl.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["kind"]) == [e.kind for e in tl.entries]


async def test_state_and_diff_show_messages_as_messages(saver: Any, tmp_path: Path) -> None:
    tl = await timeline(saver, "t", graph=builder(tmp_path))
    assert [m.type for m in tl.state(0)["messages"]] == ["human", "ai"]
    assert tl.state().checkpoint_id == tl.checkpoints[-1].checkpoint_id
    diff = tl.diff(0, 2)
    assert diff.channels == ["messages"]
    (change,) = diff.changes
    assert [type(m) for m in change.added] == [ToolMessage, AIMessage]
    assert change.removed == ()
    text = str(diff)
    assert "+ tool: " in text
    assert "→ issue_refund(" in text
    assert not tl.diff(3, 3)
    assert "no change" in str(tl.diff(3, 3))


async def test_path_numbers_the_visited_nodes(saver: Any, tmp_path: Path) -> None:
    path = (await timeline(saver, "t", graph=builder(tmp_path))).path()
    assert path.visited == (
        "__start__",
        "agent",
        "tools",
        "agent",
        "tools",
        "agent",
        "tools",
        "agent",
    )
    assert path.stopped_at == ("__end__",)
    assert 'agent["agent · 2, 4, 6, 8"]' in path.mermaid
    assert "agent -.-> tools" in path.mermaid
    assert "class __end__ stopped" in path.mermaid
    assert path._repr_markdown_().startswith("```mermaid\ngraph TD")


async def test_a_url_source_is_opened_and_closed(saver: Any, tmp_path: Path) -> None:
    async with await timeline(f"sqlite:///{tmp_path / 'runs.db'}", "t") as tl:
        assert [e.kind for e in tl.entries][:2] == ["model", "tool"]
        assert tl.state(1)["messages"][-1].type == "tool"
        with pytest.raises(DebugError, match="pass graph="):
            await tl.replay()


async def test_bad_input_is_named(saver: Any, tmp_path: Path) -> None:
    with pytest.raises(DebugError, match=r"source must be a checkpointer URL.*got int"):
        await timeline(42, "t")  # type: ignore[arg-type]
    with pytest.raises(DebugError, match="thread 'nope' has no checkpoints"):
        await timeline(saver, "nope")
    with pytest.raises(DebugError, match="graph= is for a local checkpointer"):
        await timeline("http://127.0.0.1:1", "t", graph=builder(tmp_path))
    tl = await timeline(saver, "t", graph=builder(tmp_path))
    with pytest.raises(DebugError, match=r"step 99 is not in this timeline \(steps 0 to 6\)"):
        tl.state(99)
    with pytest.raises(DebugError, match="checkpoint 'c-1' is not on thread 't'"):
        tl.diff("c-1")
    with pytest.raises(DebugError, match=r"step True is not in this timeline"):
        tl.state(True)  # a bool is not a step, though it is an int
    with pytest.raises(DebugError) as huge:
        tl.state("x" * 1_000_000)
    assert len(str(huge.value)) < 300
    assert "(1000002 characters)" in str(huge.value)
    tl.entries[0] = tl.entries[0].__class__(**{**tl.entries[0].__dict__, "kind": "approval"})
    with pytest.raises(DebugError, match="step 0 is a 'approval' row, not a model or tool step"):
        await tl.what_if(0, "text")
