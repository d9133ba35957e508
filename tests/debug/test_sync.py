"""``timeline_sync``: the timeline's calls without ``await``, in scripts and in a running loop."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from tests.debug.refund import builder, model_calls, payments, run_refund
from tether import open_checkpointer
from tether.debug import DebugError, SyncTimeline, timeline_sync


def _recorded(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'agent.db'}"

    async def record() -> None:
        async with open_checkpointer(url) as saver:
            await run_refund(saver, tmp_path, "t1")

    asyncio.run(record())
    return url


def test_the_calls_without_await(tmp_path: Path) -> None:
    url = _recorded(tmp_path)
    with timeline_sync(url, "t1", graph=builder(tmp_path)) as tl:
        assert isinstance(tl, SyncTimeline)
        assert repr(tl).startswith("<SyncTimeline thread='t1'")
        assert [e.kind for e in tl.entries] == ["model", "tool"] * 3 + ["model"]
        assert tl.replay().supersteps == 7
        assert model_calls(tmp_path) == 4
        lookup = tl.find("tool", text="lookup_order")[0]
        order = {**json.loads(lookup.output), "amount_cents": 1500}
        alt = tl.what_if(lookup.step, json.dumps(order))
        assert model_calls(tmp_path) == 7
        assert json.loads(alt.find("tool", text="issue_refund")[0].output)["amount_cents"] == 1500
        assert tl.compare(alt).channels == ["messages"]
        fork = tl.fork(lookup.step).run()
        assert len(fork) == len(tl)
        assert payments(tmp_path).refunds == 3
    with pytest.raises(DebugError, match="this timeline was closed"):
        tl.replay()


async def test_under_a_running_event_loop_as_in_a_notebook(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    async with open_checkpointer(url) as saver:
        await run_refund(saver, tmp_path, "t1")
        with pytest.raises(DebugError, match="pass the checkpointer's URL"):
            timeline_sync(saver, "t1")  # type: ignore[arg-type]
    # A cell's code runs inside the notebook's loop: asyncio.run would refuse, this does not.
    tl = timeline_sync(url, "t1", graph=builder(tmp_path))
    try:
        assert tl.replay().ok
        assert tl.state(1)["messages"][-1].type == "tool"
    finally:
        tl.close()
    tl.close()  # twice is fine


def test_a_missing_thread_is_named_and_nothing_is_left_running(tmp_path: Path) -> None:
    url = _recorded(tmp_path)
    with pytest.raises(DebugError, match="thread 'nope' has no checkpoints"):
        timeline_sync(url, "nope")
    assert [t for t in threading.enumerate() if t.name == "tether-debug"] == []
