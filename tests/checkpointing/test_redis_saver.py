"""Regression tests for tether's RedisSaver against the real Redis server.

Each test opens its own key prefix (dropped afterwards). The four causes of the
upstream saver's conformance failures each have a targeted test here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, CheckpointTuple
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from redis.asyncio import Redis

from tests.checkpointing.conftest import Prefixes
from tether.checkpointing._opener import open_checkpointer
from tether.checkpointing._sync import open_checkpointer_sync
from tether.checkpointing.redis import RedisSaver
from tether.errors import ConfigurationError


@asynccontextmanager
async def saver_at(url: str, prefix: str) -> AsyncIterator[RedisSaver]:
    async with open_checkpointer(url, key_prefix=prefix) as saver:
        assert isinstance(saver, RedisSaver)
        yield saver


@pytest.fixture
async def saver(redis_url: str, new_prefix: Prefixes) -> AsyncIterator[RedisSaver]:
    async with saver_at(redis_url, new_prefix()) as opened:
        yield opened


async def put(
    saver: RedisSaver,
    thread_id: str,
    *,
    ns: str = "",
    parent: RunnableConfig | None = None,
    values: dict[str, Any] | None = None,
    **metadata: Any,
) -> RunnableConfig:
    """Save one checkpoint (a child of ``parent`` if given) and return its config."""
    config = generate_config(thread_id, checkpoint_ns=ns)
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    checkpoint = generate_checkpoint(channel_values=values or {})
    versions: ChannelVersions = dict.fromkeys(values or {}, 1)
    checkpoint["channel_versions"] = dict(versions)
    md = generate_metadata(**metadata)
    return await saver.aput(config, checkpoint, md, versions)


async def chain(saver: RedisSaver, thread_id: str, n: int, *, ns: str = "") -> list[RunnableConfig]:
    configs: list[RunnableConfig] = []
    for step in range(n):
        parent = configs[-1] if configs else None
        configs.append(await put(saver, thread_id, ns=ns, parent=parent, step=step))
    return configs


async def listed(saver: RedisSaver, config: RunnableConfig | None, **kwargs: Any) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] async for t in saver.alist(config, **kwargs)]


def cid(config: RunnableConfig) -> str:
    checkpoint_id: str = config["configurable"]["checkpoint_id"]
    return checkpoint_id


async def keys_mentioning(raw: Redis, text: str) -> list[str]:
    return sorted([key async for key in raw.scan_iter(match=f"*{text}*", count=1000)])


# -- cause 1: checkpoint_ns="" is the root namespace, not "any" ---------------------------


async def test_list_with_empty_namespace_lists_only_the_root(saver: RedisSaver) -> None:
    tid = str(uuid4())
    root = await put(saver, tid)
    child = await put(saver, tid, ns="child:1")

    assert await listed(saver, generate_config(tid, checkpoint_ns="")) == [cid(root)]
    assert await listed(saver, generate_config(tid, checkpoint_ns="child:1")) == [cid(child)]
    every_ns: RunnableConfig = {"configurable": {"thread_id": tid}}
    assert set(await listed(saver, every_ns)) == {cid(root), cid(child)}


# -- cause 2: `before` works for UUIDv6 ids -------------------------------------------------


async def test_list_before_pages_through_uuid6_ids(saver: RedisSaver) -> None:
    tid = str(uuid4())
    ids = [cid(c) for c in await chain(saver, tid, 4)]
    assert all(len(i) == 36 and i[14] == "6" for i in ids)  # UUIDv6, not ULIDs

    cfg = generate_config(tid)
    assert await listed(saver, cfg, before=generate_config(tid, checkpoint_id=ids[2])) == [
        ids[1],
        ids[0],
    ]
    assert await listed(saver, cfg, before=generate_config(tid, checkpoint_id=ids[3]), limit=1) == [
        ids[2]
    ]
    assert await listed(saver, cfg, before=generate_config(tid, checkpoint_id=ids[0])) == []


# -- cause 3: any metadata key can be filtered on -----------------------------------------


async def test_list_filters_on_custom_metadata_keys(saver: RedisSaver) -> None:
    tid = str(uuid4())
    a = await put(saver, tid, score=42, owner={"team": "refunds"}, tag="x")
    b = await put(saver, tid, score=99, owner={"team": "billing"}, tag="x")
    cfg = generate_config(tid)

    assert await listed(saver, cfg, filter={"score": 42}) == [cid(a)]
    assert await listed(saver, cfg, filter={"owner": {"team": "billing"}}) == [cid(b)]
    assert await listed(saver, cfg, filter={"tag": "x"}) == [cid(b), cid(a)]
    assert await listed(saver, cfg, filter={"tag": "x"}, limit=1) == [cid(b)]
    assert await listed(saver, cfg, filter={"score": 42, "tag": "y"}) == []
    assert await listed(saver, cfg, filter={"missing": 1}) == []


async def test_list_source_filter_is_exact(saver: RedisSaver) -> None:
    # RediSearch TAG matching ignores case; metadata equality must not.
    tid = str(uuid4())
    lower = await put(saver, tid, source="input", step=1)
    await put(saver, tid, source="INPUT", step=1)
    cfg = generate_config(tid)

    assert await listed(saver, cfg, filter={"source": "input", "step": 1}) == [cid(lower)]
    assert await listed(saver, cfg, filter={"source": "input"}) == [cid(lower)]


async def test_writes_saved_before_their_checkpoint(saver: RedisSaver) -> None:
    # A run saves a step's writes in the background, so they can land first.
    tid = str(uuid4())
    checkpoint = generate_checkpoint()
    early = generate_config(tid, checkpoint_id=checkpoint["id"])
    await saver.aput_writes(early, [("ch", "early")], "task")
    assert await saver.aget_tuple(early) is None  # not saved yet
    assert await listed(saver, None) == []  # the stub is no checkpoint

    stored = await saver.aput(generate_config(tid), checkpoint, generate_metadata(), {})

    got = await saver.aget_tuple(stored)
    assert got is not None
    assert got.pending_writes == [("task", "ch", "early")]
    assert [t.pending_writes async for t in saver.alist(generate_config(tid))] == [
        [("task", "ch", "early")]
    ]
    assert await listed(saver, None, limit=1) == [cid(stored)]


# -- cause 4: prune([]) and the prune argument rules ---------------------------------------


async def test_prune_of_no_threads_does_nothing(saver: RedisSaver) -> None:
    tid = str(uuid4())
    await chain(saver, tid, 2)
    await saver.aprune([])
    await saver.aprune([], strategy="delete")
    assert len(await listed(saver, generate_config(tid))) == 2


async def test_prune_rejects_bad_arguments_before_deleting(saver: RedisSaver) -> None:
    tid = str(uuid4())
    await chain(saver, tid, 2)
    with pytest.raises(TypeError, match="not a single str"):
        await saver.aprune(tid)
    with pytest.raises(ConfigurationError, match="unknown prune strategy 'newest'"):
        await saver.aprune([tid], strategy="newest")
    assert len(await listed(saver, generate_config(tid))) == 2


async def test_prune_keep_latest_keeps_the_head_with_its_writes(
    saver: RedisSaver, raw: Redis
) -> None:
    tid = str(uuid4())
    configs = await chain(saver, tid, 3)
    await saver.aput_writes(configs[0], [("old", 1)], "task-old")
    await saver.aput_writes(configs[-1], [("ch", "val"), ("ch2", 2)], "task-new")

    await saver.aprune([tid], strategy="keep_latest")

    assert await listed(saver, generate_config(tid)) == [cid(configs[-1])]
    head = await saver.aget_tuple(generate_config(tid))
    assert head is not None
    assert [(w[1], w[2]) for w in head.pending_writes or []] == [("ch", "val"), ("ch2", 2)]
    assert head.parent_config is None  # its parent is gone
    for gone in configs[:-1]:
        assert await keys_mentioning(raw, cid(gone)) == []
        assert await saver.aget_tuple(generate_config(tid, checkpoint_id=cid(gone))) is None


async def test_prune_drops_a_subgraph_call_with_its_root_checkpoint(saver: RedisSaver) -> None:
    tid = str(uuid4())
    r1, r2 = await chain(saver, tid, 2)
    old_call = await put(saver, tid, ns="tool:call-1", parents={"": cid(r1)})
    live_call = await put(saver, tid, ns="tool:call-2", parents={"": cid(r2)})
    persistent = await chain(saver, tid, 2, ns="memory")  # no ":": outlives each call

    await saver.aprune([tid])

    assert await listed(saver, generate_config(tid, checkpoint_ns="tool:call-1")) == []
    assert await listed(saver, generate_config(tid, checkpoint_ns="tool:call-2")) == [
        cid(live_call)
    ]
    assert await listed(saver, generate_config(tid, checkpoint_ns="memory")) == [
        cid(persistent[-1])
    ]
    assert await listed(saver, generate_config(tid)) == [cid(r2)]
    assert await saver.aget_tuple(generate_config(tid, checkpoint_ns="tool:call-1")) is None
    assert cid(old_call) not in await listed(saver, None)


async def test_prune_refuses_threads_with_a_delta_channel(saver: RedisSaver) -> None:
    plain, delta = str(uuid4()), str(uuid4())
    await chain(saver, plain, 2)
    first = await put(saver, delta, step=0)
    await put(saver, delta, parent=first, step=1, counters_since_delta_snapshot={"m": [1, 1]})

    with pytest.raises(NotImplementedError, match=delta):
        await saver.aprune([plain, delta])
    assert len(await listed(saver, generate_config(plain))) == 2  # nothing pruned
    await saver.aprune([delta], strategy="delete")
    assert await listed(saver, generate_config(delta)) == []


# -- delete_for_runs -----------------------------------------------------------------------


async def test_delete_for_runs_removes_checkpoints_writes_and_registries(
    saver: RedisSaver, raw: Redis
) -> None:
    tid, other = str(uuid4()), str(uuid4())
    run1, run2 = str(uuid4()), str(uuid4())
    first = await put(saver, tid, run_id=run1)
    second = await put(saver, tid, parent=first, run_id=run2)
    child = await put(saver, tid, ns="child:1", run_id=run2)
    elsewhere = await put(saver, other, run_id=run2)
    for config in (first, second, child, elsewhere):
        await saver.aput_writes(config, [("ch", "v")], "t1")

    await saver.adelete_for_runs([run2])

    for gone in (second, child, elsewhere):
        assert await keys_mentioning(raw, cid(gone)) == []
    latest = await saver.aget_tuple(generate_config(tid))  # pointer moved back to run1's
    assert latest is not None
    assert cid(latest.config) == cid(first)
    assert [(w[1], w[2]) for w in latest.pending_writes or []] == [("ch", "v")]
    assert await saver.aget_tuple(generate_config(tid, checkpoint_ns="child:1")) is None
    assert await saver.aget_tuple(generate_config(other)) is None


async def test_delete_for_runs_arguments(saver: RedisSaver) -> None:
    tid = str(uuid4())
    await put(saver, tid, run_id="run-a")
    await saver.adelete_for_runs([])
    await saver.adelete_for_runs(["no-such-run"])
    with pytest.raises(TypeError, match="not a single str"):
        await saver.adelete_for_runs("run-a")
    assert len(await listed(saver, generate_config(tid))) == 1


# -- copy_thread ----------------------------------------------------------------------------


def shape(t: CheckpointTuple) -> tuple[Any, ...]:
    """Everything of a tuple except its thread id."""
    parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
    return (
        t.config["configurable"]["checkpoint_ns"],
        cid(t.config),
        t.checkpoint,
        t.metadata,
        parent,
        t.pending_writes,
    )


async def test_copy_thread_reads_back_identically(saver: RedisSaver, raw: Redis) -> None:
    src, dst = str(uuid4()), str(uuid4())
    root = await chain(saver, src, 3)
    child = await chain(saver, src, 2, ns="child:1")
    await saver.aput_writes(root[-1], [("a", 1), ("b", {"x": [1, 2]})], "task-1", "path-1")
    await saver.aput_writes(root[-1], [("c", "three")], "task-2")
    await saver.aput_writes(child[0], [("d", b"bytes")], "task-3")
    await saver.aput_writes(generate_config(src, checkpoint_id=str(uuid4())), [("e", 5)], "t")

    await saver.acopy_thread(src, dst)

    for ns in ("", "child:1"):
        head_src = await saver.aget_tuple(generate_config(src, checkpoint_ns=ns))
        head_dst = await saver.aget_tuple(generate_config(dst, checkpoint_ns=ns))
        assert head_src is not None
        assert head_dst is not None
        assert shape(head_dst) == shape(head_src)
        assert head_dst.config["configurable"]["thread_id"] == dst
    listed_src = [shape(t) async for t in saver.alist({"configurable": {"thread_id": src}})]
    listed_dst = [shape(t) async for t in saver.alist({"configurable": {"thread_id": dst}})]
    assert listed_dst == listed_src
    assert len(listed_dst) == 5
    for config in root + child:
        got = await saver.aget_tuple(
            generate_config(
                dst,
                checkpoint_ns=config["configurable"]["checkpoint_ns"],
                checkpoint_id=cid(config),
            )
        )
        assert got is not None
    # Same key layout for the copy: each source key has its twin.
    src_keys = await keys_mentioning(raw, src)
    assert sorted(k.replace(src, dst) for k in src_keys) == await keys_mentioning(raw, dst)

    await saver.adelete_thread(src)  # the copy stands on its own
    assert len(await listed(saver, {"configurable": {"thread_id": dst}})) == 5


async def test_copy_thread_onto_itself_or_from_nothing_changes_nothing(saver: RedisSaver) -> None:
    tid, empty, dst = str(uuid4()), str(uuid4()), str(uuid4())
    await chain(saver, tid, 2)
    await saver.acopy_thread(tid, tid)
    await saver.acopy_thread(empty, dst)
    assert len(await listed(saver, generate_config(tid))) == 2
    assert await listed(saver, generate_config(dst)) == []


async def test_copy_thread_into_a_thread_with_checkpoints_keeps_them(saver: RedisSaver) -> None:
    src, dst = str(uuid4()), str(uuid4())
    copied = await chain(saver, src, 2)
    own = await put(saver, dst)  # newer than the source's
    await saver.acopy_thread(src, dst)
    assert await listed(saver, generate_config(dst)) == [cid(own), cid(copied[1]), cid(copied[0])]
    latest = await saver.aget_tuple(generate_config(dst))
    assert latest is not None
    assert cid(latest.config) == cid(own)


# -- key prefixes ----------------------------------------------------------------------------


async def test_two_prefixes_never_see_each_others_data(
    redis_url: str, new_prefix: Prefixes, raw: Redis
) -> None:
    pa, pb = new_prefix(), new_prefix()
    tid = str(uuid4())
    checkpoint = generate_checkpoint()
    async with saver_at(redis_url, pa) as a, saver_at(redis_url, pb) as b:
        # The same thread and checkpoint id in both.
        for saver, value in ((a, "from-a"), (b, "from-b")):
            stored = await saver.aput(generate_config(tid), checkpoint, generate_metadata(), {})
            await saver.aput_writes(stored, [("ch", value)], "task")
        for saver, value in ((a, "from-a"), (b, "from-b")):
            got = await saver.aget_tuple(generate_config(tid))
            assert got is not None
            assert [w[2] for w in got.pending_writes or []] == [value]
            listed_writes = [t.pending_writes async for t in saver.alist(generate_config(tid))]
            assert [[w[2] for w in ws or []] for ws in listed_writes] == [[value]]

        keys = await keys_mentioning(raw, tid)
        assert keys
        assert all(k.startswith((f"{pa}_", f"{pb}_")) for k in keys), keys
        assert any("keys_zset" in k for k in keys)  # the write registry too

        await a.adelete_thread(tid)
        assert await a.aget_tuple(generate_config(tid)) is None
        assert all(k.startswith(f"{pb}_") for k in await keys_mentioning(raw, tid))
        got = await b.aget_tuple(generate_config(tid))
        assert got is not None
        assert [w[2] for w in got.pending_writes or []] == ["from-b"]


async def test_delete_thread_leaves_no_key_of_the_thread(saver: RedisSaver, raw: Redis) -> None:
    tid, other = str(uuid4()), str(uuid4())
    configs = await chain(saver, tid, 3)
    await chain(saver, tid, 2, ns="child:1")
    await saver.aput_writes(configs[-1], [("ch", 1), ("ch", 2)], "task")
    # Writes a run saved before its checkpoint, which never came.
    await saver.aput_writes(generate_config(tid, checkpoint_id=str(uuid4())), [("x", 1)], "t")
    await chain(saver, other, 1)
    assert len(await keys_mentioning(raw, tid)) > 5

    await saver.adelete_thread(tid)

    assert await keys_mentioning(raw, tid) == []
    assert len(await listed(saver, generate_config(other))) == 1


async def test_listing_and_deleting_go_past_one_search_page(saver: RedisSaver, raw: Redis) -> None:
    tid = str(uuid4())
    config = await put(saver, tid)
    # 1,100 writes on one checkpoint: more than one FT.SEARCH page of 1,000.
    await saver.aput_writes(config, [(f"ch{i}", i) for i in range(1100)], "task")
    checkpoint = await saver.aget_tuple(config)
    assert checkpoint is not None
    assert len(checkpoint.pending_writes or []) == 1100

    await saver.adelete_thread(tid)
    assert await keys_mentioning(raw, tid) == []


# -- sync use -------------------------------------------------------------------------------


def test_sync_methods_bridge_to_the_saver_loop(redis_url: str, new_prefix: Prefixes) -> None:
    import redis as sync_redis

    prefix = new_prefix()
    tid, dst = str(uuid4()), str(uuid4())
    with open_checkpointer_sync(redis_url, key_prefix=prefix) as saver:
        first = saver.put(
            generate_config(tid), generate_checkpoint(), generate_metadata(run_id="r1"), {}
        )
        second = saver.put(first, generate_checkpoint(), generate_metadata(run_id="r2"), {})
        saver.put_writes(second, [("ch", "v")], "task", "path/1")
        client = sync_redis.Redis.from_url(redis_url, decode_responses=True)
        try:
            docs = [
                json.loads(client.execute_command("JSON.GET", key))
                for key in client.scan_iter(match=f"{prefix}_checkpoint_write:*{tid}*")
            ]
        finally:
            client.close()
        assert [d["task_path"] for d in docs] == ["path/1"]  # upstream's put_writes drops it
        got = saver.get_tuple(generate_config(tid))
        assert got is not None
        assert cid(got.config) == cid(second)
        assert [t.config for t in saver.list(generate_config(tid), limit=1)] == [got.config]
        assert len(list(saver.list(generate_config(tid), filter={"run_id": "r1"}))) == 1

        saver.copy_thread(tid, dst)
        assert len(list(saver.list(generate_config(dst)))) == 2
        saver.prune([dst])
        assert len(list(saver.list(generate_config(dst)))) == 1
        saver.delete_for_runs(["r2"])
        assert [cid(t.config) for t in saver.list(generate_config(tid))] == [cid(first)]
        saver.delete_thread(tid)
        assert saver.get_tuple(generate_config(tid)) is None


async def test_sync_call_from_the_saver_loop_says_what_to_use(saver: RedisSaver) -> None:
    with pytest.raises(asyncio.InvalidStateError, match="alist"):
        saver.list(generate_config(str(uuid4())))


# -- odd inputs and options --------------------------------------------------------------------


@pytest.mark.parametrize("tid", ["user@example.com/thread 1", "a:b:c", "tag{x}|y-z*"])
async def test_thread_ids_with_punctuation(saver: RedisSaver, raw: Redis, tid: str) -> None:
    configs = await chain(saver, tid, 3)
    await saver.aput_writes(configs[-1], [("ch", 1)], "task")
    assert await listed(saver, generate_config(tid)) == [cid(c) for c in reversed(configs)]
    await saver.acopy_thread(tid, f"{tid}-copy")
    await saver.aprune([tid])
    assert await listed(saver, generate_config(tid)) == [cid(configs[-1])]
    await saver.adelete_thread(tid)
    assert await listed(saver, generate_config(tid)) == []
    assert len(await listed(saver, generate_config(f"{tid}-copy"))) == 3
    await saver.adelete_thread(f"{tid}-copy")
    assert await keys_mentioning(raw, configs[-1]["configurable"]["checkpoint_id"]) == []


async def test_copy_thread_gives_the_copy_the_configured_ttl(
    redis_url: str, new_prefix: Prefixes, raw: Redis
) -> None:
    async with open_checkpointer(redis_url, key_prefix=new_prefix(), ttl={"default_ttl": 5}) as s:
        assert isinstance(s, RedisSaver)
        src, dst = str(uuid4()), str(uuid4())
        config = await put(s, src)
        await s.aput_writes(config, [("ch", 1)], "task")
        await s.acopy_thread(src, dst)
        copied = await keys_mentioning(raw, dst)
        assert len(copied) == 4  # checkpoint, write, write registry, latest pointer
        for key in copied:
            assert 0 < await raw.ttl(key) <= 300


# -- in a graph ---------------------------------------------------------------------------------


def _counting_graph() -> Any:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        count: int

    builder = StateGraph(State)
    builder.add_node("one", lambda s: {"count": s["count"] + 1})
    builder.add_node("two", lambda s: {"count": s["count"] * 10})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", END)
    return builder


async def test_a_graph_runs_and_replays_its_history(saver: RedisSaver) -> None:
    graph = _counting_graph().compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": str(uuid4())}}
    assert await graph.ainvoke({"count": 1}, config) == {"count": 20}
    history = [s async for s in graph.aget_state_history(config)]
    assert [s.values.get("count") for s in history] == [20, 2, 1, None]
    assert (await graph.aget_state(config)).values == {"count": 20}


def test_a_graph_runs_from_sync_code(redis_url: str, new_prefix: Prefixes) -> None:
    with open_checkpointer_sync(redis_url, key_prefix=new_prefix()) as saver:
        graph = _counting_graph().compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": str(uuid4())}}
        assert graph.invoke({"count": 2}, config) == {"count": 30}
        assert len(list(graph.get_state_history(config))) == 4
        assert graph.get_state(config).values == {"count": 30}


async def test_reads_what_earlier_versions_wrote(saver: RedisSaver) -> None:
    # Earlier versions saved through upstream's aput/aput_writes and serializer:
    # channel values inline as JSON, writes typed "json".
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.redis.aio import AsyncRedisSaver
    from langgraph.checkpoint.redis.jsonplus_redis import JsonPlusRedisSerializer

    values = {"note": "hi", "items": [1, "two"], "meta": {"k": [True, None]}}
    messages = [AIMessage(content="hello", id="m1")]
    tid = str(uuid4())
    checkpoint = generate_checkpoint(channel_values={**values, "messages": messages})
    versions: ChannelVersions = dict.fromkeys(checkpoint["channel_values"], "1")
    checkpoint["channel_versions"] = dict(versions)
    ours = saver.serde
    saver.serde = JsonPlusRedisSerializer()
    try:
        stored = await AsyncRedisSaver.aput(
            saver, generate_config(tid), checkpoint, generate_metadata(step=3), versions
        )
        await AsyncRedisSaver.aput_writes(saver, stored, [("ch", {"a": 1}), ("ch2", "x")], "t")
    finally:
        saver.serde = ours

    for got in [
        await saver.aget_tuple(generate_config(tid)),
        *[t async for t in saver.alist(generate_config(tid))],
    ]:
        assert got is not None
        assert {k: got.checkpoint["channel_values"][k] for k in values} == values
        assert got.checkpoint["channel_values"]["messages"] == messages
        assert got.metadata["step"] == 3
        assert got.pending_writes == [("t", "ch", {"a": 1}), ("t", "ch2", "x")]
