"""The official ``langgraph_sdk`` client against a real ``tether serve``, unchanged."""

from __future__ import annotations

import itertools
from typing import Any
from uuid import UUID, uuid4, uuid5

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    UnprocessableEntityError,
)

GRAPHS = ("echo", "ask", "ticker", "boom", "chat", "broken")
SYSTEM = UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")


@pytest.fixture
def client(server: str) -> LangGraphClient:
    return get_client(url=server)


async def _parts(stream: Any) -> list[Any]:
    return [part async for part in stream]


async def test_ok(client: LangGraphClient) -> None:
    assert (await client.http.client.get("/ok")).json() == {"ok": True}


async def test_the_projects_http_app_and_cors(client: LangGraphClient) -> None:
    http = client.http.client
    assert (await http.get("/hello/dana")).json() == {"hello": "dana", "lifespan": ["up"]}
    assert (await http.get("/info")).json() == {"owner": "the project"}
    preflight = await http.options(
        "/threads/search",
        headers={"Origin": "https://studio.example", "Access-Control-Request-Method": "POST"},
    )
    assert preflight.headers["access-control-allow-origin"] == "https://studio.example"
    other = await http.get("/ok", headers={"Origin": "https://elsewhere.example"})
    assert "access-control-allow-origin" not in other.headers


async def test_the_openapi_document_describes_the_api_and_the_projects_routes(
    client: LangGraphClient,
) -> None:
    """The project's FastAPI app had its own /openapi.json and /docs, which won over the
    server's: the document described only the project's two routes."""
    http = client.http.client
    document = (await http.get("/openapi.json")).json()
    assert {"/threads", "/threads/{thread_id}/runs", "/hello/{name}", "/info"} <= set(
        document["paths"]
    )
    assert document["info"]["title"] == "tether"
    docs = await http.get("/docs")
    assert docs.status_code == 200
    assert "/openapi.json" in docs.text


async def test_graphs_are_system_assistants(client: LangGraphClient) -> None:
    found = await client.assistants.search(limit=100)
    by_graph = {a["graph_id"]: a for a in found}
    assert set(by_graph) >= set(GRAPHS)
    for graph_id in GRAPHS:
        assistant = by_graph[graph_id]
        assert assistant["assistant_id"] == str(uuid5(SYSTEM, graph_id))
        assert assistant["metadata"] == {"created_by": "system"}
        assert (await client.assistants.get(graph_id))["assistant_id"] == assistant["assistant_id"]
        assert (await client.assistants.get(assistant["assistant_id"]))["graph_id"] == graph_id
    assert await client.assistants.count(graph_id="echo") >= 1
    echo = await client.assistants.search(graph_id="echo")
    assert {a["graph_id"] for a in echo} == {"echo"}


async def test_created_assistant_runs_its_graph(client: LangGraphClient) -> None:
    made = await client.assistants.create("echo", name="my echo", metadata={"team": "t1"})
    assert made["graph_id"] == "echo"
    assert made["name"] == "my echo"
    assert (await client.assistants.get(made["assistant_id"]))["metadata"] == {"team": "t1"}
    found = await client.assistants.search(metadata={"team": "t1"})
    assert [a["assistant_id"] for a in found] == [made["assistant_id"]]
    thread = await client.threads.create()
    out = await client.runs.wait(thread["thread_id"], made["assistant_id"], input={"text": "x"})
    assert out == {"text": "x", "trace": ["a", "b", "c"]}


async def test_unknown_graph_for_an_assistant_is_named(client: LangGraphClient) -> None:
    with pytest.raises(NotFoundError, match=r"graph 'nope' is not in langgraph.json"):
        await client.assistants.create("nope")


async def test_thread_create_get_search_delete(client: LangGraphClient) -> None:
    tag = uuid4().hex
    thread = await client.threads.create(metadata={"tag": tag})
    assert thread["status"] == "idle"
    assert thread["metadata"] == {"tag": tag}
    got = await client.threads.get(thread["thread_id"])
    assert got["thread_id"] == thread["thread_id"]
    found = await client.threads.search(metadata={"tag": tag})
    assert [t["thread_id"] for t in found] == [thread["thread_id"]]
    assert await client.threads.count(metadata={"tag": tag}) == 1
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=thread["thread_id"])
    same = await client.threads.create(thread_id=thread["thread_id"], if_exists="do_nothing")
    assert same["thread_id"] == thread["thread_id"]
    await client.threads.delete(thread["thread_id"])
    with pytest.raises(NotFoundError, match="no thread"):
        await client.threads.get(thread["thread_id"])


async def test_wait_returns_the_values_and_the_thread_keeps_them(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    created: list[Any] = []
    out = await client.runs.wait(tid, "echo", input={"text": "hi"}, on_run_created=created.append)
    assert out == {"text": "hi", "trace": ["a", "b", "c"]}
    run_id = created[0]["run_id"]
    run = await client.runs.get(tid, run_id)
    assert run["status"] == "success"
    assert run["thread_id"] == tid
    assert [r["run_id"] for r in await client.runs.list(tid)] == [run_id]
    assert (await client.runs.join(tid, run_id)) == out
    got = await client.threads.get(tid)
    assert got["status"] == "idle"
    assert got["values"] == out
    state = await client.threads.get_state(tid)
    assert state["values"] == out
    assert state["next"] == []
    assert state["checkpoint"]["thread_id"] == tid
    history = await client.threads.get_history(tid, limit=10)
    assert history[0]["values"] == out
    assert (
        next(h["checkpoint"]["checkpoint_id"] for h in history)
        == (state["checkpoint"]["checkpoint_id"])
    )
    earlier = await client.threads.get_state(
        tid, checkpoint_id=history[1]["checkpoint"]["checkpoint_id"]
    )
    assert earlier["values"] == history[1]["values"]


async def test_background_run_then_join(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "echo", input={"text": "bg"})
    assert run["status"] == "pending"
    out = await client.runs.join(thread["thread_id"], run["run_id"])
    assert out == {"text": "bg", "trace": ["a", "b", "c"]}
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"


async def test_stream_sends_metadata_then_modes_in_order_then_end(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    created: list[Any] = []
    parts = await _parts(
        client.runs.stream(
            thread["thread_id"],
            "echo",
            input={"text": "s"},
            stream_mode=["values", "updates"],
            on_run_created=created.append,
        )
    )
    events = [p.event for p in parts]
    assert events[0] == "metadata"
    assert parts[0].data["run_id"] == created[0]["run_id"]
    assert events[-1] == "end"
    assert parts[-1].data == {"run_id": created[0]["run_id"], "status": "success"}
    assert [p.data for p in parts if p.event == "updates"] == [
        {"a": {"trace": ["a"]}},
        {"b": {"trace": ["b"]}},
        {"c": {"trace": ["c"]}},
    ]
    values = [p.data for p in parts if p.event == "values"]
    assert values[0] == {"text": "s"} or values[0]["trace"] in ([], ["a"])
    assert values[-1] == {"text": "s", "trace": ["a", "b", "c"]}
    ids = [int(p.id) for p in parts[:-1]]
    assert ids == sorted(set(ids))


async def test_stream_of_values_only(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    parts = await _parts(client.runs.stream(thread["thread_id"], "echo", input={"text": "v"}))
    assert {p.event for p in parts} == {"metadata", "values", "end"}


async def test_join_stream_replays_after_last_event_id(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "echo", input={"text": "j"}, stream_mode=["updates"])
    whole = await _parts(client.runs.join_stream(tid, run["run_id"], last_event_id="0"))
    assert [p.event for p in whole] == ["metadata", "updates", "updates", "updates", "end"]
    rest = await _parts(client.runs.join_stream(tid, run["run_id"], last_event_id=whole[1].id))
    assert [(p.event, p.data) for p in rest] == [(p.event, p.data) for p in whole[2:]]
    only = await _parts(
        client.runs.join_stream(tid, run["run_id"], stream_mode="values", last_event_id="0")
    )
    assert [p.event for p in only] == ["metadata", "end"]


async def test_interrupt_then_resume_with_a_command(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    created: list[Any] = []
    out = await client.runs.wait(tid, "ask", input={"text": "box"}, on_run_created=created.append)
    interrupts = out["__interrupt__"]
    assert [i["value"] for i in interrupts] == [{"question": "ship box?"}]
    got = await client.threads.get(tid)
    assert got["status"] == "interrupted"
    assert [i["value"] for items in got["interrupts"].values() for i in items] == [
        {"question": "ship box?"}
    ]
    first = await client.runs.get(tid, created[0]["run_id"])
    assert first["status"] == "success"  # LangGraph reports a run stopped at an interrupt so
    state = await client.threads.get_state(tid)
    assert state["next"] == ["question"]
    assert [i["value"] for i in state["interrupts"]] == [{"question": "ship box?"}]

    parts = await _parts(
        client.runs.stream(tid, "ask", command={"resume": "yes"}, stream_mode="updates")
    )
    assert [p.data for p in parts if p.event == "updates"] == [
        {"question": {"answer": "yes", "trace": ["asked"]}},
        {"after": {"trace": ["after"]}},
    ]
    final = await client.threads.get(tid)
    assert final["status"] == "idle"
    assert final["values"] == {
        "text": "box",
        "trace": ["before", "asked", "after"],
        "answer": "yes",
    }
    assert [r["status"] for r in await client.runs.list(tid)] == ["success", "success"]


async def test_wait_answers_every_interrupt_of_a_step(client: LangGraphClient) -> None:
    """Two nodes that interrupt in one step are two events; ``runs.wait`` answers with both,
    as LangGraph's server does (it answered with the last one only)."""
    thread = await client.threads.create()
    tid = thread["thread_id"]
    out = await client.runs.wait(tid, "pair", input={})
    assert sorted(i["value"] for i in out["__interrupt__"]) == ["left?", "right?"]
    state = await client.threads.get_state(tid)
    ids = {i["value"]: i["id"] for i in state["interrupts"]}
    out = await client.runs.wait(tid, "pair", command={"resume": {ids["left?"]: "L"}})
    assert [i["value"] for i in out["__interrupt__"]] == ["right?"]
    # Both answers set `answer` in one step: LangGraph's conflict. The run fails with it,
    # and the thread's state, which LangGraph cannot assemble, is a 400, not a 500.
    out = await client.runs.wait(
        tid, "pair", command={"resume": {ids["right?"]: "R"}}, raise_error=False
    )
    assert "Can receive only one value per step" in str(out["__error__"])
    with pytest.raises(BadRequestError, match="cannot be read: At key 'answer'"):
        await client.threads.get_state(tid)


async def test_cancel_a_running_run(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    stream = client.runs.stream(
        tid,
        "ticker",
        input={"until": 100000},
        config={"recursion_limit": 200000},
        stream_mode="values",
    )
    parts = []
    run_id = None
    async for part in stream:
        parts.append(part)
        if part.event == "metadata":
            run_id = part.data["run_id"]
        if part.event == "values" and part.data.get("n", 0) >= 1 and len(parts) == 3:
            assert run_id is not None
            await client.runs.cancel(tid, run_id)
    assert parts[-1].event == "end"
    assert parts[-1].data["status"] == "interrupted"
    assert run_id is not None
    run = await client.runs.get(tid, run_id)
    assert run["status"] == "interrupted"
    ticks = await client.runs.join(tid, run_id)
    assert 1 <= ticks["n"] < 100000
    with pytest.raises(NotFoundError, match="No matching runs to cancel"):
        await client.runs.cancel(tid, run_id)


async def test_cancel_a_pending_run_with_wait(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "echo", input={"text": "later"}, after_seconds=3600)
    await client.runs.cancel(tid, run["run_id"], wait=True)
    got = await client.runs.get(tid, run["run_id"])
    assert got["status"] == "interrupted"
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_rolled_back_run_is_gone(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "echo", input={"text": "x"}, after_seconds=3600)
    await client.runs.cancel(tid, run["run_id"], action="rollback")
    with pytest.raises(NotFoundError, match="rolled back"):
        await client.runs.get(tid, run["run_id"])
    assert await client.runs.list(tid) == []


async def test_reject_strategy_refuses_a_second_run(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "echo", input={"text": "x"}, after_seconds=3600)
    with pytest.raises(ConflictError, match="already running"):
        await client.runs.create(tid, "echo", input={}, multitask_strategy="reject")
    await client.runs.cancel(tid, run["run_id"])


async def test_a_failing_run_reports_its_error(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    out = await client.runs.wait(tid, "boom", input={"text": "b"}, raise_error=False)
    assert out == {"__error__": {"error": "ValueError", "message": "boom: cannot handle 'b'"}}
    with pytest.raises(Exception, match="ValueError: boom"):
        await client.runs.wait(tid, "boom", input={"text": "b"})
    assert (await client.threads.get(tid))["status"] == "error"
    parts = await _parts(client.runs.stream(tid, "boom", input={"text": "c"}))
    assert [p.event for p in parts] == ["metadata", "values", "error", "end"]
    assert parts[2].data["error"] == "ValueError"
    assert parts[-1].data["status"] == "error"


async def test_unknown_ids_answer_404_naming_them(client: LangGraphClient) -> None:
    missing = str(uuid4())
    with pytest.raises(NotFoundError, match=f"no thread '{missing}'"):
        await client.threads.get(missing)
    with pytest.raises(NotFoundError, match=f"no thread '{missing}'"):
        await client.threads.get_state(missing)
    with pytest.raises(httpx.HTTPStatusError) as raised:  # the SDK's wait raises httpx's own
        await client.runs.wait(missing, "echo", input={})
    assert raised.value.response.status_code == 404
    assert f"no thread '{missing}'" in raised.value.response.text
    with pytest.raises(NotFoundError, match="no assistant"):
        await client.assistants.get("no-such-graph")
    thread = await client.threads.create()
    with pytest.raises(NotFoundError, match=f"no run '{missing}'"):
        await client.runs.get(thread["thread_id"], missing)
    with pytest.raises(NotFoundError, match="no assistant"):
        await client.runs.create(thread["thread_id"], "no-such-graph", input={})
    other = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "echo", input={"text": "x"})
    with pytest.raises(NotFoundError, match="on thread"):
        await client.runs.get(other["thread_id"], run["run_id"])
    await client.runs.join(thread["thread_id"], run["run_id"])


@pytest.mark.parametrize(
    "thread_id", ["../x", "..", "a/b/c", "100%", "%2F", "über ✓ 🎉", "a?b#c", " spaced "]
)
async def test_hostile_thread_ids_round_trip(client: LangGraphClient, thread_id: str) -> None:
    tid = thread_id if thread_id == ".." else f"{thread_id}-{uuid4().hex[:6]}"
    await client.threads.create(thread_id=tid, if_exists="do_nothing")
    assert (await client.threads.get(tid))["thread_id"] == tid
    out = await client.runs.wait(tid, "echo", input={"text": tid})
    assert out["text"] == tid
    assert (await client.threads.get_state(tid))["values"]["text"] == tid
    runs = await client.runs.list(tid)
    assert runs[0]["thread_id"] == tid
    parts = await _parts(client.runs.join_stream(tid, runs[0]["run_id"], last_event_id="0"))
    assert parts[-1].event == "end"


async def test_malformed_requests_are_named(client: LangGraphClient) -> None:
    with pytest.raises(UnprocessableEntityError, match="NUL"):
        await client.threads.create(thread_id="a\x00b")
    with pytest.raises(UnprocessableEntityError, match=r"too long|limit"):
        await client.threads.create(thread_id="x" * 300)
    thread = await client.threads.create()
    with pytest.raises(UnprocessableEntityError, match="stream_mode"):
        await client.runs.create(thread["thread_id"], "echo", stream_mode="bogus")  # type: ignore[arg-type]
    with pytest.raises(UnprocessableEntityError, match="webhook"):
        await client.runs.create(thread["thread_id"], "echo", webhook="http://x")


async def test_an_assistants_graph_and_schemas(client: LangGraphClient) -> None:
    drawn = await client.assistants.get_graph("echo")
    assert {n["id"] for n in drawn["nodes"]} == {"__start__", "a", "b", "c", "__end__"}
    assert {(e["source"], e["target"]) for e in drawn["edges"]} == {
        ("__start__", "a"),
        ("a", "b"),
        ("b", "c"),
        ("c", "__end__"),
    }
    schemas = await client.assistants.get_schemas(str(uuid5(SYSTEM, "ask")))
    assert schemas["graph_id"] == "ask"
    assert {"text", "trace", "answer"} <= set(schemas["input_schema"]["properties"])
    assert {"text", "trace", "answer"} <= set(schemas["state_schema"]["properties"])


async def test_stateless_runs_wait_and_stream(client: LangGraphClient) -> None:
    out = await client.runs.wait(None, "echo", input={"text": "no thread"})
    assert out == {"text": "no thread", "trace": ["a", "b", "c"]}
    created: list[Any] = []
    parts = await _parts(
        client.runs.stream(
            None,
            "echo",
            input={"text": "s"},
            stream_mode="updates",
            on_completion="keep",
            on_run_created=created.append,
        )
    )
    assert [p.event for p in parts] == ["metadata", "updates", "updates", "updates", "end"]
    again = await _parts(
        client.runs.join_stream(created[0]["thread_id"], created[0]["run_id"], last_event_id="0")
    )
    assert [(p.event, p.data) for p in again] == [(p.event, p.data) for p in parts]


async def test_interrupt_strategy_supersedes_the_running_run(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    first = await client.runs.create(
        tid, "ticker", input={"until": 100000}, config={"recursion_limit": 200000}
    )
    busy = await client.threads.get(tid)
    assert busy["status"] == "busy"
    out = await client.runs.wait(tid, "echo", input={"text": "new"}, multitask_strategy="interrupt")
    assert out["text"] == "new"
    old = await client.runs.get(tid, first["run_id"])
    assert old["status"] == "interrupted"
    assert "superseded" in old["cancel_reason"]


async def test_messages_stream_token_by_token(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    question = {"messages": [{"role": "user", "content": "hi"}]}
    parts = await _parts(client.runs.stream(tid, "chat", input=question, stream_mode="messages"))
    events = [p.event for p in parts]
    assert events[0] == "metadata"
    assert events[1] == "messages/metadata"
    assert "reply-1" in parts[1].data
    partial = [p.data[0]["content"] for p in parts if p.event == "messages/partial"]
    assert len(partial) > 1  # token by token, each the message so far
    assert partial[-1] == "hello from tether"
    assert all(b.startswith(a) for a, b in itertools.pairwise(partial))

    parts = await _parts(
        client.runs.stream(tid, "chat", input=question, stream_mode="messages-tuple")
    )
    chunks = [p.data for p in parts if p.event == "messages"]
    assert "".join(chunk["content"] for chunk, _meta in chunks) == "hello from tether"
    assert {meta["langgraph_node"] for _chunk, meta in chunks} == {"reply"}


def test_the_sync_client_works_too(server: str) -> None:
    client = get_sync_client(url=server)
    thread = client.threads.create()
    out = client.runs.wait(thread["thread_id"], "echo", input={"text": "sync"})
    assert out == {"text": "sync", "trace": ["a", "b", "c"]}
    events = [p.event for p in client.runs.stream(thread["thread_id"], "echo", input={})]
    assert events[0] == "metadata"
    assert events[-1] == "end"


async def test_if_not_exists_create_makes_the_thread(client: LangGraphClient) -> None:
    tid = f"ticket-{uuid4().hex[:8]}"
    out = await client.runs.wait(tid, "echo", input={"text": "new"}, if_not_exists="create")
    assert out["text"] == "new"
    thread = await client.threads.get(tid)
    assert thread["metadata"]["graph_id"] == "echo"


async def test_list_runs_by_status_and_cancel_many(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    done = await client.runs.create(tid, "echo", input={"text": "x"})
    await client.runs.join(tid, done["run_id"])
    later = [
        await client.runs.create(tid, "echo", input={"text": "y"}, after_seconds=3600)
        for _ in range(2)
    ]
    pending = await client.runs.list(tid, status="pending")
    assert {r["run_id"] for r in pending} == {r["run_id"] for r in later}
    assert [r["run_id"] for r in await client.runs.list(tid, status="success")] == [done["run_id"]]
    assert len(await client.runs.list(tid, limit=1, offset=1)) == 1
    await client.runs.cancel_many(thread_id=tid, run_ids=[r["run_id"] for r in later])
    statuses = {r["run_id"]: r["status"] for r in await client.runs.list(tid)}
    assert statuses == {
        done["run_id"]: "success",
        later[0]["run_id"]: "interrupted",
        later[1]["run_id"]: "interrupted",
    }
    with pytest.raises(NotFoundError, match="No matching runs to cancel"):
        await client.runs.cancel_many(thread_id=tid, run_ids=[later[0]["run_id"]])
    with pytest.raises(UnprocessableEntityError, match="exactly one"):
        await client.runs.cancel_many(thread_id=tid, run_ids=[done["run_id"]], status="all")


async def test_a_last_event_id_that_is_not_ours_is_refused(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "echo", input={})
    with pytest.raises(UnprocessableEntityError, match="Last-Event-ID '1712345678-0'"):
        await _parts(
            client.runs.join_stream(
                thread["thread_id"], run["run_id"], last_event_id="1712345678-0"
            )
        )


async def test_a_run_marks_its_thread_with_its_graph_and_assistant(
    client: LangGraphClient,
) -> None:
    """As LangGraph's server: a thread created empty and then run is found by its graph."""
    thread = await client.threads.create(metadata={"owner": "ann"})
    tid = thread["thread_id"]
    assert (await client.threads.get(tid))["metadata"] == {"owner": "ann"}
    await client.runs.wait(tid, "echo", input={})
    echo = (await client.assistants.search(graph_id="echo"))[0]["assistant_id"]
    marks = {"owner": "ann", "graph_id": "echo", "assistant_id": echo}
    assert (await client.threads.get(tid))["metadata"] == marks
    found = await client.threads.search(metadata={"graph_id": "echo", "owner": "ann"}, limit=100)
    assert tid in [t["thread_id"] for t in found]


async def test_last_event_id_minus_one_replays_the_whole_run(client: LangGraphClient) -> None:
    """LangGraph's clients rebuild a run's stream from its start with ``Last-Event-ID: -1``."""
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "echo", input={}, stream_resumable=True)
    await client.runs.join(thread["thread_id"], run["run_id"])
    whole = await _parts(client.runs.join_stream(thread["thread_id"], run["run_id"]))
    again = await _parts(
        client.runs.join_stream(thread["thread_id"], run["run_id"], last_event_id="-1")
    )
    assert [p.event for p in again] == [p.event for p in whole]
    assert again[0].event == "metadata"


async def test_interrupt_before_then_continue_with_no_input(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    out = await client.runs.wait(tid, "echo", input={"text": "ib"}, interrupt_before=["b"])
    assert out["trace"] == ["a"]
    got = await client.threads.get(tid)
    assert got["status"] == "interrupted"
    assert (await client.threads.get_state(tid))["next"] == ["b"]
    out = await client.runs.wait(tid, "echo", input=None)
    assert out == {"text": "ib", "trace": ["a", "b", "c"]}
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_a_run_from_an_earlier_checkpoint_forks_the_thread(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "echo", input={"text": "one"})
    history = await client.threads.get_history(tid, limit=20)
    after_a = next(h for h in history if h["values"].get("trace") == ["a"])
    out = await client.runs.wait(
        tid, "echo", input=None, checkpoint_id=after_a["checkpoint"]["checkpoint_id"]
    )
    assert out == {"text": "one", "trace": ["a", "b", "c"]}
    newest = await client.threads.get_state(tid)
    assert newest["parent_checkpoint"]["checkpoint_id"] != history[0]["checkpoint"]["checkpoint_id"]


async def test_a_checkpoint_the_thread_lacks_is_404_and_nothing_runs_or_changes(
    client: LangGraphClient, server: str
) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "echo", input={"text": "one"})
    before = await client.threads.get_history(tid, limit=50)
    real = before[-1]["checkpoint"]["checkpoint_id"]
    missing = real[:-4] + ("0000" if not real.endswith("0000") else "1111")
    named = f"thread '{tid}' has no checkpoint '{missing}'"
    with pytest.raises(NotFoundError, match=named):
        await client.threads.get_state(tid, checkpoint_id=missing)
    with pytest.raises(NotFoundError, match=named):
        await client.threads.get_state(tid, checkpoint={"checkpoint_id": missing})
    # LangGraph alone would write a new state from nothing: the thread's would be replaced
    with pytest.raises(NotFoundError, match=named):
        await client.threads.update_state(tid, {"text": "zz"}, checkpoint_id=missing)
    # ... and run from nothing, as if the thread were new
    with pytest.raises(httpx.HTTPStatusError) as raised:
        await client.runs.wait(tid, "echo", input={"text": "two"}, checkpoint_id=missing)
    assert raised.value.response.status_code == 404
    assert named in raised.value.response.text
    with pytest.raises(NotFoundError, match=named):
        await client.runs.create(tid, "echo", input={"text": "two"}, checkpoint_id=missing)
    with pytest.raises(UnprocessableEntityError, match="needs a thread_id"):
        await client.runs.create(None, "echo", input={"text": "two"}, checkpoint_id=real)
    async with httpx.AsyncClient(base_url=server) as raw:
        bad = await raw.post(
            f"/threads/{tid}/state/checkpoint", json={"checkpoint": {"checkpoint_id": 7}}
        )
        assert bad.status_code == 422, bad.text
        assert "checkpoint_id must be a string" in bad.text
        nul = await raw.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "echo", "checkpoint": {"checkpoint_id": "a\x00b"}},
        )
        assert nul.status_code == 422, nul.text
        assert "checkpoint_id" in nul.text
    assert len(await client.runs.list(tid)) == 1
    assert await client.threads.get_history(tid, limit=50) == before
    assert (await client.threads.get_state(tid))["values"] == {
        "text": "one",
        "trace": ["a", "b", "c"],
    }
    assert (await client.threads.get_state(tid, checkpoint_id=real))["checkpoint"][
        "checkpoint_id"
    ] == real


@pytest.mark.parametrize(
    ("checkpoint", "named"),
    [
        ({"checkpoint_ns": 5}, "checkpoint.checkpoint_ns must be a string, got int"),
        ({"checkpoint_ns": ["a"]}, "checkpoint.checkpoint_ns must be a string, got list"),
        ({"checkpoint_id": {"a": 1}}, "checkpoint.checkpoint_id must be a string, got dict"),
        ({"checkpoint_map": {"": 1}}, "checkpoint.checkpoint_map must be an object of strings"),
        ({"checkpoint_map": "x"}, "checkpoint.checkpoint_map must be an object of strings"),
    ],
)
async def test_a_checkpoint_address_that_is_not_text_is_a_422_everywhere(
    client: LangGraphClient, server: str, checkpoint: dict[str, Any], named: str
) -> None:
    """They were 500s: LangGraph split the namespace as a string."""
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "echo", input={"text": "one"})
    before = await client.threads.get_history(tid, limit=50)
    async with httpx.AsyncClient(base_url=server) as raw:
        for path, extra in [
            ("state/checkpoint", {}),
            ("history", {"limit": 5}),
            ("state", {"values": {"text": "changed"}}),
        ]:
            answer = await raw.post(
                f"/threads/{tid}/{path}", json={**extra, "checkpoint": checkpoint}
            )
            assert answer.status_code == 422, (path, answer.text)
            assert named in answer.text, (path, answer.text)
    assert await client.threads.get_history(tid, limit=50) == before


async def test_stream_version_2_parts(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    parts = await _parts(
        client.runs.stream(
            thread["thread_id"],
            "ask",
            input={"text": "v2"},
            stream_mode=["values", "updates"],
            version="v2",
        )
    )
    assert next(p["type"] for p in parts) == "metadata"
    assert "end" not in [p["type"] for p in parts]
    last_values = [p for p in parts if p["type"] == "values"][-1]
    assert [i["value"] for i in last_values["interrupts"]] == [{"question": "ship v2?"}]
    assert all(p["ns"] == [] for p in parts)


async def test_events_stream_langchain_callback_events(client: LangGraphClient) -> None:
    """``stream_mode="events"`` streams every callback event of the run (``astream_events``
    v2), the chat model's tokens included, beside any other mode asked for."""
    thread = await client.threads.create()
    tid = thread["thread_id"]
    question = {"messages": [{"role": "user", "content": "hi"}]}
    parts = await _parts(
        client.runs.stream(tid, "chat", input=question, stream_mode=["events", "values"])
    )
    assert parts[0].event == "metadata"
    events = [p.data for p in parts if p.event == "events"]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "on_chain_start"
    assert events[0]["name"] == "chat"  # the graph, named by its id
    assert kinds[-1] == "on_chain_end"
    assert {"run_id", "name", "tags", "metadata", "data", "parent_ids"} <= set(events[0])
    started = {e["name"] for e in events if e["event"] == "on_chain_start"}
    assert "reply" in started
    tokens = [e["data"]["chunk"]["content"] for e in events if e["event"] == "on_chat_model_stream"]
    assert len(tokens) > 1
    assert "".join(tokens) == "hello from tether"
    # The graph's own stream chunks are not events: they come under their modes.
    assert "on_chain_stream" not in {e["event"] for e in events if e["name"] == "chat"}
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["messages"][-1]["content"] == "hello from tether"
    state = await client.threads.get_state(tid)
    assert state["values"]["messages"][-1]["content"] == "hello from tether"


async def test_stream_modes_tether_does_not_serve_are_named(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    with pytest.raises(UnprocessableEntityError, match="'tools' is only served on the v2 routes"):
        await _parts(client.runs.stream(thread["thread_id"], "echo", input={}, stream_mode="tools"))


async def test_a_failing_graph_factory_is_named(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    out = await client.runs.wait(thread["thread_id"], "broken", input={}, raise_error=False)
    assert out["__error__"]["error"] == "ProjectConfigError"
    assert "AGENT_API_KEY is not set" in out["__error__"]["message"]
    with pytest.raises(httpx.HTTPStatusError) as raised:
        await client.assistants.get_graph("broken")
    assert raised.value.response.status_code == 500
    assert "graph 'broken'" in raised.value.response.json()["detail"]
    assert "AGENT_API_KEY is not set" in raised.value.response.json()["detail"]


@pytest.mark.parametrize("hostile", ["../x", "..", "a/b", "%2E%2E", "ü/✓", "x" * 300])
async def test_hostile_run_and_assistant_ids_are_plain_404s(
    client: LangGraphClient, hostile: str
) -> None:
    thread = await client.threads.create()
    with pytest.raises(NotFoundError, match="no run"):
        await client.runs.get(thread["thread_id"], hostile)
    with pytest.raises(NotFoundError, match="no assistant"):
        await client.assistants.get(hostile)
    missing = f"{hostile}-{uuid4().hex}"  # ".." itself is a thread of another test here
    with pytest.raises(NotFoundError, match="no thread"):
        await client.threads.get_state(missing[-255:])
