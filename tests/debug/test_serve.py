"""The same timeline calls against a running ``tether serve``, through the official SDK."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    UnprocessableEntityError,
)

from tests.debug.refund import builder, model_calls, payments
from tests.server.conftest import ServeProcess
from tether.debug import DebugError, timeline, timeline_sync
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
        assert remote.state(1)["messages"][-1].type == "tool"
        assert remote.state(1)["messages"] == local.state(1)["messages"]
        assert remote.path().visited == local.path().visited
        assert "agent -.-> tools" in remote.path().mermaid
        assert "<table" in remote._repr_html_()
        with pytest.raises(DebugError, match="step 99 is not in this timeline"):
            await remote.fork(99)
        with pytest.raises(DebugError, match="step 99 is not in this timeline"):
            await remote.what_if(99, "{}")
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


async def test_the_notebook_calls_against_the_server(served: ServeProcess) -> None:
    """examples/time_travel.ipynb's calls, on a served thread: the same answers as locally."""
    thread_id = await _refund_thread(served.base)
    workdir = served.workdir
    calls, refunds = model_calls(workdir), payments(workdir).refunds
    tl = await timeline(served.base, thread_id)
    try:
        assert len(tl) == 7
        assert "lookup_order" in str(tl)
        assert "<table" in tl.state(1)._repr_html_()
        lookup = tl.find("tool", text="lookup_order")[0]
        refund = tl.find("tool", text="issue_refund")[0]
        assert [m.type for m in tl.diff(lookup.step, refund.step).changes[0].added] == [
            "ai",
            "tool",
        ]

        # Fork at the refund with the proposed amount edited, and run the fork on.
        proposed = tl.state(refund.checkpoint_id)["messages"][-1]
        call = proposed.tool_calls[0]
        edited = proposed.model_copy(
            update={"tool_calls": [{**call, "args": {**call["args"], "amount_cents": 2000}}]}
        )
        fork = await tl.fork(refund.step, update={"messages": [edited]}, as_node="agent")
        assert fork.thread_id != thread_id
        assert [s.output for s in fork.steps] == [s.output for s in tl.steps[:3]]
        assert all(s.detail["copied_from"][0] == thread_id for s in fork.steps)
        fork = await fork.run()
        assert model_calls(workdir) == calls + 2  # only the two answers after the refund
        refunded = json.loads(fork.find("tool", text="issue_refund")[0].output)
        assert refunded["amount_cents"] == 2000
        assert payments(workdir).refunds == refunds + 1
        assert tl.compare(fork).channels == ["messages"]

        # Replay: zero model calls, no refund, every super-step matched.
        calls, counts = model_calls(workdir), payments(workdir)
        result = await tl.replay()
        assert (result.ok, result.supersteps) == (True, 7)
        assert model_calls(workdir) == calls
        assert payments(workdir) == counts

        # What-if: the order lookup reports 1500 cents; the steps after it run live.
        order = {**json.loads(lookup.output), "amount_cents": 1500}
        alt = await tl.what_if(lookup.step, json.dumps(order))
        assert model_calls(workdir) == calls + 3  # propose, email, report
        assert json.loads(alt.entries[1].output) == order
        issued = json.loads(alt.find("tool", text="issue_refund")[0].output)
        assert issued["amount_cents"] == 1500
        after = payments(workdir)
        # The branch's refund happened once, under a new key; the original one was not repeated.
        assert (after.refund_attempts, after.refunds) == (
            counts.refund_attempts + 1,
            counts.refunds + 1,
        )
        assert tl.compare(alt).channels == ["messages"]
        assert tl.path().visited == (
            "__start__",
            *("agent", "tools") * 3,
            "agent",
        )
        # The server's own step log of the branch: the replaced lookup, then new steps.
        assert [s.kind for s in alt.steps] == ["model", "tool"] * 3 + ["model"]
        assert alt.steps[1].detail.get("replaced") is True
    finally:
        await tl.aclose()


async def test_the_fork_and_what_if_routes_refuse_bad_input(served: ServeProcess) -> None:
    thread_id = await _refund_thread(served.base)
    client = get_client(url=served.base)
    fork, what_if = f"/threads/{thread_id}/fork", f"/threads/{thread_id}/what_if"
    missing = "00000000-0000-0000-0000-000000000000"
    calls = model_calls(served.workdir)
    refusals = [
        (fork, {}, "one of step or checkpoint_id"),
        (fork, {"step": 1, "checkpoint_id": "c-1"}, "one of step or checkpoint_id"),
        (fork, {"checkpoint_id": "c-1"}, "checkpoint 'c-1' is not on thread"),
        (fork, {"step": 99}, "step 99 is not in this timeline"),
        (what_if, {"step": 99, "output": "x"}, "step 99 is not in this timeline"),
        (what_if, {"step": 0, "output": 42}, "a model step's new answer must be a message"),
        (what_if, {"step": 0, "output": {"type": "nope", "content": "x"}}, "not a message"),
    ]
    for path, body, message in refusals:
        with pytest.raises(UnprocessableEntityError, match=message):
            await client.http.post(path, json=body)
    with pytest.raises(UnprocessableEntityError) as refused:
        await client.http.post(what_if, json={"output": "x"})
    assert "step" in str(refused.value.response.json()["detail"])
    # A bad update: refused, and the half-made fork is gone.
    with pytest.raises(BadRequestError, match="cannot update the state"):
        await client.http.post(fork, json={"step": 1, "as_node": "nope", "thread_id": "f-bad"})
    with pytest.raises(NotFoundError):
        await client.threads.get("f-bad")
    not_messages = {"step": 1, "update": {"messages": 5}, "as_node": "agent"}
    with pytest.raises(BadRequestError, match="Unsupported message type"):
        await client.http.post(fork, json=not_messages)
    with pytest.raises(BadRequestError, match="Unsupported message type"):
        await client.threads.update_state(thread_id, {"messages": 5}, as_node="agent")
    # A taken id is refused before anything is copied into it.
    await client.http.post(fork, json={"step": 1, "thread_id": "f-1"})
    with pytest.raises(ConflictError):
        await client.http.post(fork, json={"step": 3, "thread_id": "f-1"})
    with pytest.raises(ConflictError):
        await client.http.post(what_if, json={"step": 1, "output": "{}", "thread_id": "f-1"})
    async with await timeline(served.base, "f-1") as forked:
        assert len(forked.steps) == 1  # the first answer, copied; step 3 was not forked into it
    for path in (f"/threads/{missing}/fork", f"/threads/{missing}/what_if"):
        with pytest.raises(NotFoundError):
            await client.http.post(path, json={"step": 0, "output": "x"})
    empty = (await client.threads.create())["thread_id"]
    with pytest.raises(ConflictError, match="has no graph of this project to fork"):
        await client.http.post(f"/threads/{empty}/fork", json={"step": 0})
    with pytest.raises(ConflictError, match="has no graph of this project to run a what-if"):
        await client.http.post(f"/threads/{empty}/what_if", json={"step": 0, "output": "x"})
    assert model_calls(served.workdir) == calls


def test_the_calls_without_await_against_the_server(served: ServeProcess) -> None:
    thread_id = asyncio.run(_refund_thread(served.base))
    calls = model_calls(served.workdir)
    with timeline_sync(served.base, thread_id) as tl:
        assert len(tl) == 7
        assert tl.replay().supersteps == 7
        fork = tl.fork(2)  # where the model proposed the refund
        assert [s.output for s in fork.steps] == [s.output for s in tl.steps[:2]]
        assert [e.kind for e in fork.run().entries] == [e.kind for e in tl.entries]
    assert model_calls(served.workdir) == calls + 3  # steps 2, 4 and 6 ran live in the fork
