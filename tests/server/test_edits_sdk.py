"""The official SDK's editing calls against a real ``tether serve``: thread update,
state update, copy, prune, history filters, run deletion and batches, assistant
versions and subgraphs, thread search by values, stateless cleanup, RemoteGraph."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID, uuid4, uuid5

import httpx
import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    UnprocessableEntityError,
)

SYSTEM = UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
ECHOED = {"text": "x", "trace": ["a", "b", "c"]}


@pytest.fixture
def client(server: str) -> LangGraphClient:
    return get_client(url=server)


async def _echoed(client: LangGraphClient, text: str = "x", **metadata: Any) -> str:
    """A thread on which graph ``echo`` ran once."""
    thread = await client.threads.create(metadata=metadata or None)
    await client.runs.wait(thread["thread_id"], "echo", input={"text": text})
    return str(thread["thread_id"])


# -- threads ------------------------------------------------------------------------------


async def test_update_merges_thread_metadata(client: LangGraphClient) -> None:
    thread = await client.threads.create(metadata={"a": 1, "b": 2})
    tid = thread["thread_id"]
    updated = await client.threads.update(tid, metadata={"b": "two", "c": [3]})
    assert updated["metadata"] == {"a": 1, "b": "two", "c": [3]}
    assert (await client.threads.get(tid))["metadata"] == updated["metadata"]
    assert await client.threads.update(tid, metadata={"d": 4}, return_minimal=True) is None
    assert (await client.threads.get(tid))["metadata"]["d"] == 4
    with pytest.raises(NotFoundError, match="no thread 'update-missing' for this tenant"):
        await client.threads.update("update-missing", metadata={"a": 1})
    with pytest.raises(UnprocessableEntityError, match="ttl is not supported"):
        await client.threads.update(tid, metadata={}, ttl=5)


async def test_update_state_writes_a_checkpoint_and_the_threads_values(
    client: LangGraphClient,
) -> None:
    tid = await _echoed(client)
    answer = await client.threads.update_state(tid, {"text": "edited"}, as_node="c")
    checkpoint = answer["checkpoint"]
    assert (checkpoint["thread_id"], checkpoint["checkpoint_ns"]) == (tid, "")
    # LangGraph's answer has the id and the config that addresses the checkpoint, too
    assert answer["checkpoint_id"] == checkpoint["checkpoint_id"]
    assert answer["configurable"] == {
        "thread_id": tid, "checkpoint_ns": "", "checkpoint_id": checkpoint["checkpoint_id"],
    }  # fmt: skip
    state = await client.threads.get_state(tid)
    assert state["values"] == {"text": "edited", "trace": ["a", "b", "c"]}
    assert state["checkpoint"]["checkpoint_id"] == checkpoint["checkpoint_id"]
    assert state["metadata"]["source"] == "update"
    thread = await client.threads.get(tid)
    assert (thread["status"], thread["values"]) == ("idle", state["values"])
    # A run continues from the updated state.
    out = await client.runs.wait(tid, "echo", input={"trace": ["again"]})
    assert out["text"] == "edited"


async def test_update_state_at_a_checkpoint_forks_from_it(client: LangGraphClient) -> None:
    tid = await _echoed(client)
    history = await client.threads.get_history(tid, limit=20)
    after_a = next(h for h in history if h["values"].get("trace") == ["a"])
    answer = await client.threads.update_state(
        tid, {"text": "forked"}, as_node="a", checkpoint=after_a["checkpoint"]
    )
    state = await client.threads.get_state(tid)
    assert state["checkpoint"]["checkpoint_id"] == answer["checkpoint"]["checkpoint_id"]
    assert state["parent_checkpoint"]["checkpoint_id"] == after_a["checkpoint"]["checkpoint_id"]
    assert state["values"] == {"text": "forked", "trace": ["a"]}
    assert state["next"] == ["b"]
    assert (await client.threads.get(tid))["status"] == "interrupted"
    # The deprecated checkpoint_id argument addresses a checkpoint too.
    await client.threads.update_state(
        tid, {"text": "again"}, as_node="a", checkpoint_id=after_a["checkpoint"]["checkpoint_id"]
    )
    assert (await client.threads.get_state(tid))["values"]["text"] == "again"


async def test_update_state_resolves_an_interrupt(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "ask", input={"text": "box"})
    assert (await client.threads.get(tid))["status"] == "interrupted"
    await client.threads.update_state(tid, {"answer": "yes"}, as_node="question")
    state = await client.threads.get_state(tid)
    assert (state["values"]["answer"], state["next"]) == ("yes", ["after"])
    out = await client.runs.wait(tid, "ask")
    assert out["trace"] == ["before", "after"]
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_a_thread_created_with_supersteps_starts_from_them(client: LangGraphClient) -> None:
    """``threads.create(supersteps=…)`` seeds a thread's state, as if its nodes had run;
    a run then continues from it."""
    thread = await client.threads.create(
        graph_id="echo",
        supersteps=[
            {"updates": [{"values": {"text": "seeded"}, "as_node": "__start__"}]},
            {"updates": [{"values": {"trace": ["a"]}, "as_node": "a"}]},
        ],
    )
    tid = thread["thread_id"]
    state = await client.threads.get_state(tid)
    assert (state["values"], state["next"]) == ({"text": "seeded", "trace": ["a"]}, ["b"])
    history = await client.threads.get_history(tid)
    # what LangGraph's bulk_update_state writes in process, checkpoint for checkpoint
    assert [(h["metadata"]["source"], h["next"]) for h in history] == [
        ("update", ["b"]),
        ("update", ["a"]),
    ]
    assert (await client.threads.get(tid))["values"] == {"text": "seeded", "trace": ["a"]}
    out = await client.runs.wait(tid, "echo", input=None)
    assert out == {"text": "seeded", "trace": ["a", "b", "c"]}
    ran = len(await client.threads.get_history(tid))
    assert ran == len(history) + 2  # b and c
    # Retried with if_exists="do_nothing", the thread is returned as it is: applied once.
    again = await client.threads.create(
        thread_id=tid,
        graph_id="echo",
        if_exists="do_nothing",
        supersteps=[{"updates": [{"values": {"trace": ["z"]}, "as_node": "c"}]}],
    )
    assert again["thread_id"] == tid
    assert len(await client.threads.get_history(tid)) == ran


async def test_concurrent_retries_of_a_create_with_supersteps_apply_them_once(
    client: LangGraphClient,
) -> None:
    """A client retrying a create (``if_exists="do_nothing"``) while the first try is in
    flight gets the same thread, whose supersteps were applied by exactly one request."""
    supersteps = [{"updates": [{"values": {"trace": ["a"]}, "as_node": "a"}]}]
    for _ in range(3):
        tid = str(uuid4())
        made = await asyncio.gather(
            *(
                client.threads.create(
                    thread_id=tid, graph_id="echo", supersteps=supersteps, if_exists="do_nothing"
                )
                for _ in range(4)
            )
        )
        assert {m["thread_id"] for m in made} == {tid}
        history = await client.threads.get_history(tid)
        assert [h["values"] for h in history] == [{"trace": ["a"]}]


async def test_supersteps_that_cannot_be_applied_leave_no_thread(client: LangGraphClient) -> None:
    tid = str(uuid4())
    with pytest.raises(BadRequestError, match="Node no-such-node does not exist"):
        await client.threads.create(
            thread_id=tid,
            graph_id="echo",
            supersteps=[{"updates": [{"values": {"text": "x"}, "as_node": "no-such-node"}]}],
        )
    with pytest.raises(NotFoundError):
        await client.threads.get(tid)
    with pytest.raises(UnprocessableEntityError, match="supersteps need the thread's graph"):
        await client.threads.create(
            thread_id=tid, supersteps=[{"updates": [{"values": {}, "as_node": "a"}]}]
        )
    with pytest.raises(NotFoundError, match=r"graph 'nope' is not in langgraph\.json"):
        await client.threads.create(
            thread_id=tid,
            graph_id="nope",
            supersteps=[{"updates": [{"values": {}, "as_node": "a"}]}],
        )
    http = client.http.client
    for supersteps in ([{"updates": []}], [{"updates": [{"values": {}}]}], "x", [{"u": 1}]):
        answer = await http.post(
            "/threads",
            json={"thread_id": tid, "metadata": {"graph_id": "echo"}, "supersteps": supersteps},
        )
        assert answer.status_code == 422, (supersteps, answer.text)
    with pytest.raises(NotFoundError):
        await client.threads.get(tid)


async def test_update_state_refusals(client: LangGraphClient) -> None:
    bare = await client.threads.create()
    # LangGraph's server answers 400 here too
    with pytest.raises(BadRequestError, match="has no graph yet"):
        await client.threads.update_state(bare["thread_id"], {"text": "x"})
    with pytest.raises(NotFoundError, match="no thread 'state-missing'"):
        await client.threads.update_state("state-missing", {"text": "x"})
    tid = await _echoed(client)
    with pytest.raises(BadRequestError, match="cannot update the state of thread"):
        await client.threads.update_state(tid, {"text": "x"}, as_node="no-such-node")
    busy = await client.threads.create()
    run = await client.runs.create(
        busy["thread_id"], "ticker", input={"until": 100000}, config={"recursion_limit": 200000}
    )
    try:
        with pytest.raises(ConflictError, match=f"has run '{run['run_id']}'"):
            await client.threads.update_state(busy["thread_id"], {"n": 0})
    finally:
        await client.runs.cancel(busy["thread_id"], run["run_id"], wait=True)


async def test_update_state_cannot_answer_a_tether_approval(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "gated", input={"text": "crate"})
    (run,) = await client.runs.list(tid)
    waiting = f"run '{run['run_id']}' on thread .* waits on approval"
    with pytest.raises(ConflictError, match=waiting):
        await client.threads.update_state(tid, {"answer": "approve"}, as_node="approve")
    assert (await client.threads.get_state(tid))["next"] == ["approve"]


async def test_a_thread_created_with_a_graph_id_takes_a_first_state(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create(graph_id="echo")
    tid = thread["thread_id"]
    await client.threads.update_state(tid, {"text": "seeded"}, as_node="c")
    seeded = {"text": "seeded", "trace": []}
    assert (await client.threads.get_state(tid))["values"] == seeded
    assert (await client.threads.get(tid))["values"] == seeded


async def test_history_before_limit_and_metadata(client: LangGraphClient) -> None:
    tid = await _echoed(client)
    await client.threads.update_state(tid, {"text": "later"}, as_node="c")
    history = await client.threads.get_history(tid, limit=100)
    assert len(history) == 6  # input, a, b, c, update... newest first
    ids = [h["checkpoint"]["checkpoint_id"] for h in history]
    assert ids == sorted(ids, reverse=True)
    newest = await client.threads.get_history(tid, limit=2)
    assert [h["checkpoint"]["checkpoint_id"] for h in newest] == ids[:2]
    before = await client.threads.get_history(tid, limit=2, before=ids[1])
    assert [h["checkpoint"]["checkpoint_id"] for h in before] == ids[2:4]
    as_dict = await client.threads.get_history(tid, limit=100, before=history[3]["checkpoint"])
    assert [h["checkpoint"]["checkpoint_id"] for h in as_dict] == ids[4:]
    updates = await client.threads.get_history(tid, metadata={"source": "update"})
    assert [h["values"]["text"] for h in updates] == ["later"]
    steps = await client.threads.get_history(tid, metadata={"source": "loop", "step": 1})
    assert [h["values"]["trace"] for h in steps] == [["a"]]


async def test_a_runs_metadata_reaches_its_checkpoints(client: LangGraphClient) -> None:
    """As on LangGraph's server: a run's metadata is in its config's, so its checkpoints
    carry it (scalar values) and a history filter finds that run's checkpoints."""
    thread = await client.threads.create()
    tid = thread["thread_id"]
    tagged = await client.runs.create(
        tid, "echo", input={"text": "x"}, metadata={"who": "ann", "n": 3, "run_id": "spoofed"}
    )
    await client.runs.join(tid, tagged["run_id"])
    await client.runs.wait(tid, "echo", input={"text": "y"})
    mine = await client.threads.get_history(tid, limit=100, metadata={"who": "ann"})
    assert len(mine) == 5  # input, start, a, b, c
    assert {(h["metadata"]["n"], h["metadata"]["run_id"]) for h in mine} == {
        (3, tagged["run_id"])
    }  # tether's own keys win over the run's
    assert len(await client.threads.get_history(tid, limit=100)) == 10


async def test_copy_takes_metadata_state_and_history_not_runs(client: LangGraphClient) -> None:
    tid = await _echoed(client, team="copying")
    copy = await client.threads.copy(tid)
    assert copy is not None
    new = copy["thread_id"]
    assert new != tid
    assert copy["metadata"]["team"] == "copying"
    assert copy["values"] == ECHOED
    assert (await client.threads.get_state(new))["values"] == ECHOED
    source = await client.threads.get_history(tid, limit=100)
    copied = await client.threads.get_history(new, limit=100)
    assert [h["values"] for h in copied] == [h["values"] for h in source]
    assert await client.runs.list(new) == []
    out = await client.runs.wait(new, "echo", input={"text": "on the copy"})
    assert out["trace"] == ["a", "b", "c", "a", "b", "c"]
    assert (await client.threads.get_state(tid))["values"] == ECHOED
    with pytest.raises(NotFoundError):
        await client.threads.copy("copy-missing")


async def test_prune_deletes_or_keeps_the_latest_checkpoint(client: LangGraphClient) -> None:
    gone = await _echoed(client)
    kept = await _echoed(client)
    result = await client.threads.prune([gone, "prune-missing"])
    assert result == {"pruned_count": 1}
    with pytest.raises(NotFoundError):
        await client.threads.get(gone)
    assert await client.threads.prune([kept], strategy="keep_latest") == {"pruned_count": 1}
    history = await client.threads.get_history(kept, limit=100)
    assert [h["values"] for h in history] == [ECHOED]
    assert (await client.threads.get_state(kept))["values"] == ECHOED


async def test_search_by_values_sorted_and_selected(client: LangGraphClient) -> None:
    tag = uuid4().hex
    ids = sorted([await _echoed(client, text=f"{tag}-{i}", tag=tag) for i in range(3)])
    found = await client.threads.search(values={"text": f"{tag}-1"})
    assert [t["thread_id"] for t in found] == [ids_by_text(found, f"{tag}-1")]
    assert await client.threads.count(values={"trace": ["b"]}, metadata={"tag": tag}) == 3
    ordered = await client.threads.search(
        metadata={"tag": tag}, sort_by="thread_id", sort_order="asc", limit=2, offset=1
    )
    assert [t["thread_id"] for t in ordered] == ids[1:]
    newest = await client.threads.search(metadata={"tag": tag}, sort_by="created_at")
    assert [t["values"]["text"] for t in newest] == [f"{tag}-2", f"{tag}-1", f"{tag}-0"]
    slim = await client.threads.search(metadata={"tag": tag}, select=["thread_id", "status"])
    assert all(set(t) == {"thread_id", "status"} for t in slim)
    with pytest.raises(UnprocessableEntityError, match="select has unknown thread field"):
        await client.threads.search(select=["nope"])  # type: ignore[list-item]
    assert await client.threads.search(values={"text": f"{tag}-none"}) == []


def ids_by_text(found: list[Any], text: str) -> str:
    (only,) = [t["thread_id"] for t in found if t["values"]["text"] == text]
    return str(only)


# -- runs ---------------------------------------------------------------------------------


async def test_delete_a_stopped_run(client: LangGraphClient) -> None:
    tid = await _echoed(client)
    (run,) = await client.runs.list(tid)
    await client.runs.delete(tid, run["run_id"])
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, run["run_id"])
    assert await client.runs.list(tid) == []
    assert (await client.threads.get_state(tid))["values"] == ECHOED
    with pytest.raises(NotFoundError):
        await client.runs.delete(tid, run["run_id"])
    thread = await client.threads.create()
    busy = await client.runs.create(
        thread["thread_id"], "ticker", input={"until": 100000}, config={"recursion_limit": 200000}
    )
    try:
        with pytest.raises(ConflictError, match="cancel it before deleting it"):
            await client.runs.delete(thread["thread_id"], busy["run_id"])
    finally:
        await client.runs.cancel(thread["thread_id"], busy["run_id"], wait=True)
    await client.runs.delete(thread["thread_id"], busy["run_id"])


async def test_create_batch_makes_stateless_runs(client: LangGraphClient) -> None:
    runs = await client.runs.create_batch(
        [
            {"assistant_id": "echo", "input": {"text": "one"}, "on_completion": "keep"},
            {"assistant_id": "echo", "input": {"text": "two"}, "on_completion": "keep"},
        ]
    )
    assert [r["status"] for r in runs] == ["pending", "pending"]
    assert len({r["thread_id"] for r in runs}) == 2
    outs = [await client.runs.join(r["thread_id"], r["run_id"]) for r in runs]
    assert [o["text"] for o in outs] == ["one", "two"]
    with pytest.raises(UnprocessableEntityError, match="webhook"):
        await client.runs.create_batch(
            [{"assistant_id": "echo"}, {"assistant_id": "echo", "webhook": "http://x"}]
        )


async def test_stateless_runs_delete_their_thread_unless_kept(client: LangGraphClient) -> None:
    created: list[Any] = []
    out = await client.runs.wait(
        None, "echo", input={"text": "temp"}, on_run_created=created.append
    )
    assert out["text"] == "temp"
    with pytest.raises(NotFoundError):
        await client.threads.get(created[0]["thread_id"])
    streamed: list[Any] = []
    parts = [
        p
        async for p in client.runs.stream(
            None, "echo", input={"text": "s"}, on_run_created=streamed.append
        )
    ]
    assert parts[-1].event == "end"
    with pytest.raises(NotFoundError):
        await client.threads.get(streamed[0]["thread_id"])
    kept: list[Any] = []
    await client.runs.wait(
        None, "echo", input={"text": "k"}, on_completion="keep", on_run_created=kept.append
    )
    thread = await client.threads.get(kept[0]["thread_id"])
    assert thread["values"]["text"] == "k"


# -- assistants ---------------------------------------------------------------------------


async def test_assistant_update_versions_and_set_latest(client: LangGraphClient) -> None:
    made = await client.assistants.create(
        "echo", config={"tags": ["v1"]}, name="versioned", metadata={"team": "t"}
    )
    aid = made["assistant_id"]
    updated = await client.assistants.update(aid, name="renamed", metadata={"env": "prod"})
    assert (updated["version"], updated["name"], updated["config"]) == (
        2, "renamed", {"tags": ["v1"]},
    )  # fmt: skip
    assert updated["metadata"] == {"team": "t", "env": "prod"}
    moved = await client.assistants.update(aid, graph_id="ask", config={"tags": ["v3"]})
    assert (moved["version"], moved["graph_id"]) == (3, "ask")
    versions = await client.assistants.get_versions(aid)
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert "updated_at" not in versions[0]
    oldest = await client.assistants.get_versions(aid, limit=1, offset=2)
    assert [v["version"] for v in oldest] == [1]
    prod = await client.assistants.get_versions(aid, metadata={"env": "prod"})
    assert [v["version"] for v in prod] == [3, 2]
    back = await client.assistants.set_latest(aid, 1)
    assert (back["version"], back["name"], back["graph_id"]) == (1, "versioned", "echo")
    thread = await client.threads.create()
    out = await client.runs.wait(thread["thread_id"], aid, input={"text": "x"})
    assert out == ECHOED
    with pytest.raises(NotFoundError, match="has no version 7"):
        await client.assistants.set_latest(aid, 7)
    with pytest.raises(NotFoundError, match=r"graph 'nope' is not in langgraph\.json"):
        await client.assistants.update(aid, graph_id="nope")
    with pytest.raises(NotFoundError, match="no assistant 'no-such-assistant'"):
        await client.assistants.update("no-such-assistant", name="x")


async def test_assistant_delete(client: LangGraphClient) -> None:
    made = await client.assistants.create("echo", name="short-lived")
    aid = made["assistant_id"]
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], aid, input={"text": "x"})
    listed = await client.assistants.search(name="short-lived", limit=100)
    assert [a["assistant_id"] for a in listed] == [aid]
    await client.assistants.delete(aid)
    with pytest.raises(NotFoundError):
        await client.assistants.get(aid)
    assert await client.assistants.search(name="short-lived") == []
    with pytest.raises(NotFoundError):
        await client.assistants.delete(aid)
    with pytest.raises(UnprocessableEntityError, match="system assistant of graph 'echo'"):
        await client.assistants.delete(str(uuid5(SYSTEM, "echo")))
    # delete_threads also deletes the threads the assistant's runs created
    other = await client.assistants.create("echo", name="with-threads")
    tid = str(uuid4())
    await client.runs.wait(tid, other["assistant_id"], input={"text": "x"}, if_not_exists="create")
    await client.assistants.delete(other["assistant_id"], delete_threads=True)
    with pytest.raises(NotFoundError):
        await client.threads.get(tid)


async def test_an_assistants_config_and_context_reach_its_runs(client: LangGraphClient) -> None:
    """A new user's first reason to create an assistant: the same graph with another model
    or persona. Its config and context were stored but never reached a run."""
    made = await client.assistants.create(
        "configured",
        config={"configurable": {"model": "m1", "temperature": 0.2}, "tags": ["persona"]},
        context={"tone": "warm", "signature": "Ann"},
        name="warm",
    )
    aid = made["assistant_id"]
    thread = await client.threads.create()
    out = await client.runs.wait(thread["thread_id"], aid, input={})
    assert {k: v for k, v in out["answer"].items() if k != "tags"} == {
        "model": "m1", "temperature": 0.2, "tone": "warm", "signature": "Ann",
    }  # fmt: skip
    assert "persona" in out["answer"]["tags"]
    # The run's own values win, key by key; a stateless run is merged the same way.
    out = await client.runs.wait(
        None,
        aid,
        input={},
        config={"configurable": {"temperature": 0.9}},
        context={"signature": "Bo"},
    )
    assert out["answer"]["model"] == "m1"
    assert (out["answer"]["temperature"], out["answer"]["tone"]) == (0.9, "warm")
    assert out["answer"]["signature"] == "Bo"
    # A run queued before the assistant changes keeps the version it was created with.
    queued = await client.runs.create(thread["thread_id"], aid, input={}, after_seconds=1)
    await client.assistants.update(aid, context={"tone": "cold"})
    await client.runs.join(thread["thread_id"], queued["run_id"])
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["answer"]["tone"] == "warm"
    out = await client.runs.wait(thread["thread_id"], aid, input={})
    assert (out["answer"]["tone"], out["answer"]["signature"]) == ("cold", None)
    # Made the way LangGraph's older docs show (configurable only), the graph still reads
    # it as its context, as on LangGraph's server.
    older = await client.assistants.create("configured", config={"configurable": {"tone": "dry"}})
    assert older["context"] == {"tone": "dry"}
    out = await client.runs.wait(None, older["assistant_id"], input={})
    assert out["answer"]["tone"] == "dry"
    # The graph's own assistant has none of them.
    out = await client.runs.wait(None, "configured", input={})
    assert (out["answer"]["model"], out["answer"]["tone"]) == (None, None)
    # A config no run may have is refused when the assistant is made, naming the key.
    with pytest.raises(UnprocessableEntityError, match="'__pregel_checkpointer' is reserved"):
        await client.assistants.create(
            "configured", config={"configurable": {"__pregel_checkpointer": "x"}}
        )


async def test_assistant_search_sorted_and_selected(client: LangGraphClient) -> None:
    tag = uuid4().hex
    made = [
        await client.assistants.create("echo", name=f"{tag}-{n}", metadata={"tag": tag})
        for n in ("b", "c", "a")
    ]
    by_name = await client.assistants.search(metadata={"tag": tag}, sort_by="name")
    assert [a["name"] for a in by_name] == [f"{tag}-c", f"{tag}-b", f"{tag}-a"]
    oldest = await client.assistants.search(
        metadata={"tag": tag}, sort_by="created_at", sort_order="asc", limit=2, offset=1
    )
    assert [a["assistant_id"] for a in oldest] == [made[1]["assistant_id"], made[2]["assistant_id"]]
    slim = await client.assistants.search(metadata={"tag": tag}, select=["assistant_id", "name"])
    assert all(set(a) == {"assistant_id", "name"} for a in slim)
    with pytest.raises(UnprocessableEntityError):
        await client.assistants.search(sort_by="nope")  # type: ignore[arg-type]


async def test_subgraphs_and_xray(client: LangGraphClient) -> None:
    top = await client.assistants.get_subgraphs("nested")
    assert list(top) == ["inner"]
    assert "text" in top["inner"]["input_schema"]["properties"]
    deep = await client.assistants.get_subgraphs("nested", recurse=True)
    assert set(deep) == {"inner", "inner|deep"}
    assert set(await client.assistants.get_subgraphs("nested", namespace="inner")) == {"inner"}
    assert await client.assistants.get_subgraphs("echo") == {}
    flat = await client.assistants.get_graph("nested")
    xray = await client.assistants.get_graph("nested", xray=True)
    assert len(xray["nodes"]) > len(flat["nodes"])
    assert any(n["id"].startswith("inner:deep") for n in xray["nodes"])


async def test_a_subgraph_tasks_checkpoint_says_where_its_state_is(
    client: LangGraphClient,
) -> None:
    """In history (``subgraphs`` not asked for), a pending subgraph task names the
    subgraph's thread and namespace, as on LangGraph's server; it was ``null``."""
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "nested", input={"text": "x"})
    history = await client.threads.get_history(tid)
    before = next(h for h in history if h["next"] == ["inner"])
    [task] = before["tasks"]
    assert task["checkpoint"]["thread_id"] == tid
    assert task["checkpoint"]["checkpoint_ns"].startswith("inner:")
    assert task["state"] is None


# -- RemoteGraph --------------------------------------------------------------------------


async def test_remote_graph_invoke_stream_and_state(server: str) -> None:
    remote = RemoteGraph("echo", url=server)
    config: Any = {"configurable": {"thread_id": str(uuid4())}}
    await get_client(url=server).threads.create(thread_id=config["configurable"]["thread_id"])
    out = await remote.ainvoke({"text": "remote"}, config)
    assert out == {"text": "remote", "trace": ["a", "b", "c"]}
    chunks = [c async for c in remote.astream({"text": "again"}, config, stream_mode="updates")]
    assert [next(iter(c)) for c in chunks] == ["a", "b", "c"]
    state = await remote.aget_state(config)
    assert state.values["text"] == "again"
    written = await remote.aupdate_state(config, {"text": "patched"}, as_node="c")
    assert written["configurable"]["checkpoint_id"]
    assert (await remote.aget_state(config)).values["text"] == "patched"
    history = [s async for s in remote.aget_state_history(config, limit=3)]
    assert [s.values["text"] for s in history][:1] == ["patched"]
    assert len(history) == 3
    sync = RemoteGraph("echo", sync_client=get_sync_client(url=server))
    assert sync.get_state(config).values["text"] == "patched"
    assert sync.invoke({"text": "sync"}, config)["text"] == "sync"


async def test_the_new_routes_are_no_longer_501(client: LangGraphClient) -> None:
    http = client.http.client
    for method, path in [
        ("PATCH", "/threads/nope-501"),
        ("POST", "/threads/nope-501/copy"),
        ("DELETE", "/threads/nope-501/runs/r"),
        ("GET", "/assistants/nope-501/subgraphs"),
    ]:
        answer = await http.request(method, path, json={"metadata": {}})
        assert answer.status_code == 404, (method, path, answer.text)
    answer = await http.post("/runs/batch", json=[])
    assert (answer.status_code, answer.json()) == (200, [])
    assert isinstance(answer, httpx.Response)
