"""The same timeline calls against a running ``tether serve``, through the official SDK."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from tests.debug.refund import builder, model_calls
from tests.server.conftest import ServeProcess
from tether.debug import DebugError, timeline
from tether.graphs import refund_input

PROJECT = Path(__file__).parent / "project" / "langgraph.json"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """A ``tether serve`` of the refund agent on SQLite (its checkpoints in ``runtime.db``)."""
    workdir = tmp_path_factory.mktemp("serve")
    process = ServeProcess(f"sqlite:///{workdir / 'runtime.db'}", workdir, project=PROJECT)
    try:
        process.start()
        yield process
    finally:
        process.stop()


async def _refund_thread(base: str) -> str:
    client = get_client(url=base)
    thread = await client.threads.create()
    message = {"role": "user", "content": refund_input()["messages"][0].content}
    await client.runs.wait(thread["thread_id"], "refund", input={"messages": [message]})
    return str(thread["thread_id"])


async def test_a_served_thread_reads_as_the_local_one(served: ServeProcess) -> None:
    thread_id = await _refund_thread(served.base)
    remote = await timeline(served.base, thread_id)
    local = await timeline(str(served.url), thread_id, graph=builder(served.workdir))
    try:
        assert len(remote) == 7
        row = lambda e: (e.step, e.kind, e.node, e.summary, e.tokens, e.checkpoint_id)  # noqa: E731
        assert [row(e) for e in remote.entries] == [row(e) for e in local.entries]
        assert [s.output for s in remote.steps] == [s.output for s in local.steps]
        assert str(remote.diff(0, 2)) == str(local.diff(0, 2))
        assert [m.type for m in remote.diff(0, 2).changes[0].added] == ["tool", "ai"]
        assert remote.state(1)["messages"][-1]["type"] == "tool"
        assert remote.path().visited == local.path().visited
        assert "agent -.-> tools" in remote.path().mermaid
        assert "<table" in remote._repr_html_()
        with pytest.raises(DebugError, match="a tether serve is read-only here"):
            await remote.fork(1)
        with pytest.raises(DebugError, match="a tether serve is read-only here"):
            await remote.what_if(1, "{}")
    finally:
        await remote.aclose()
        await local.aclose()
    # Reading a thread (remotely or locally) asked the model nothing.
    assert model_calls(served.workdir) == 4


async def test_replay_of_a_served_thread_on_its_checkpointer(served: ServeProcess) -> None:
    thread_id = await _refund_thread(served.base)
    calls = model_calls(served.workdir)
    async with await timeline(str(served.url), thread_id, graph=builder(served.workdir)) as tl:
        result = await tl.replay()
    assert result.ok
    assert model_calls(served.workdir) == calls


async def test_the_server_replays_with_its_own_graph(served: ServeProcess) -> None:
    thread_id = await _refund_thread(served.base)
    calls = model_calls(served.workdir)
    async with await timeline(served.base, thread_id) as remote:
        result = await remote.replay()
        partial = await remote.replay(upto=2)
    assert result.ok
    assert result.supersteps == 7
    assert partial.supersteps == 3  # steps 0, 1 and 2, the last one included
    assert model_calls(served.workdir) == calls
    # The scratch threads are gone from the checkpointer, and the thread is as it was.
    async with await timeline(str(served.url), thread_id) as local:
        assert len(local) == 7
    client = get_client(url=served.base)
    assert [t["thread_id"] for t in await client.threads.search(limit=1000)].count(thread_id) == 1
    with pytest.raises(NotFoundError):
        await client.http.post("/threads/00000000-0000-0000-0000-000000000000/replay", json={})
    with pytest.raises(UnprocessableEntityError, match="checkpoint 'c-1' is not on thread"):
        await client.http.post(f"/threads/{thread_id}/replay", json={"upto": "c-1"})
    empty = await client.threads.create()
    with pytest.raises(ConflictError, match="has no graph of this project to replay"):
        await client.http.post(f"/threads/{empty['thread_id']}/replay", json={})


async def test_the_steps_route(served: ServeProcess) -> None:
    thread_id = await _refund_thread(served.base)
    client = get_client(url=served.base)
    found = await client.http.get(f"/threads/{thread_id}/steps")
    steps = found["steps"]
    assert [s["kind"] for s in steps] == ["model", "tool"] * 3 + ["model"]
    assert steps[0]["output"]["message"]["type"] == "ai"
    assert steps[0]["index"] == 0
    with pytest.raises(NotFoundError):
        await client.http.get("/threads/00000000-0000-0000-0000-000000000000/steps")
