"""Redis saves are all-or-nothing, and a torn save left by an earlier version heals on read.

A save writes the checkpoint document, moves its namespace's "latest" pointer
and sets expiries. Done in separate round trips (as upstream does), a process
killed in between leaves the pointer on the previous checkpoint; LangGraph then
resumes from there, or reports a run with work left as finished. The step log
has the same shape: a sequence number, then the step.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
from redis.asyncio import Redis

from tests.checkpointing.conftest import Prefixes
from tests.checkpointing.encryption_helpers import ring
from tests.checkpointing.gate_graph import build
from tether.checkpointing._opener import open_checkpointer
from tether.store import store_for


async def monitored(url: str, action: Callable[[], Awaitable[Any]]) -> list[dict[str, Any]]:
    """The commands Redis ran while ``action`` ran, as MONITOR reports them (all clients).

    MONITOR sees every client of the server, including other test workers; a
    line the client library cannot parse is skipped rather than ending the
    watch, and anything else that stops the watcher fails the test with its
    own error instead of a timeout.
    """
    # Markers unique to this call: another test worker's MONITOR sees them too.
    stop = f"tether-test-monitor-stop-{uuid.uuid4().hex}"
    seen: list[dict[str, Any]] = []
    ready = threading.Event()
    failure: list[BaseException] = []

    def watch() -> None:
        try:
            client = redis.Redis.from_url(url)
            with client.monitor() as monitor:
                client.echo(f"{stop}-ready")  # through another connection of the pool
                while True:
                    try:
                        command = monitor.next_command()
                    except (AttributeError, ValueError):  # an unparsable line
                        continue
                    if f"{stop}-ready" in command["command"]:
                        ready.set()
                        continue
                    if stop in command["command"]:
                        return
                    seen.append(command)
        except BaseException as error:  # surfaced to the test below
            failure.append(error)
            ready.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert await asyncio.to_thread(ready.wait, 60), "MONITOR did not start within 60 s"
    if failure:
        raise failure[0]
    await action()
    probe = Redis.from_url(url)
    await probe.echo(stop)
    await probe.aclose()
    await asyncio.to_thread(watcher.join, 60)
    if failure:
        raise failure[0]
    assert not watcher.is_alive(), "MONITOR did not see the stop marker within 60 s"
    return seen


def by_connection(commands: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The commands clients sent (not those scripts ran), per connection, in order."""
    sent: dict[str, list[str]] = {}
    for c in commands:
        if c.get("client_type") != "lua":
            sent.setdefault(c["client_port"], []).append(c["command"])
    return sent


async def test_a_save_writes_document_pointer_and_expiry_in_one_transaction(
    redis_url: str, new_prefix: Prefixes
) -> None:
    prefix = new_prefix()
    async with open_checkpointer(redis_url, key_prefix=prefix, ttl={"default_ttl": 5}) as saver:
        graph = build(saver)
        config: Any = {"configurable": {"thread_id": "t1"}}
        commands = await monitored(
            redis_url, lambda: graph.ainvoke({"items": []}, config, durability="sync")
        )
    saves = 0
    for sent in by_connection(commands).values():
        for at, command in enumerate(sent):
            if command.startswith(f"JSON.SET {prefix}_checkpoint:"):
                saves += 1
                _assert_in_one_transaction(sent, at, prefix)
    assert saves >= 3  # input, after "propose", after "gate" interrupted


def _assert_in_one_transaction(sent: list[str], at: int, prefix: str) -> None:
    """The checkpoint save ``sent[at]`` sits in a MULTI/EXEC with its pointer and expiries."""
    opened = [i for i in range(at) if sent[i] in ("MULTI", "EXEC")]
    assert opened, f"{sent[at][:80]} ran outside a transaction"
    assert sent[opened[-1]] == "MULTI", f"{sent[at][:80]} ran outside a transaction"
    end = sent.index("EXEC", at)
    block = sent[opened[-1] : end + 1]
    key = sent[at].split()[1]
    assert f"EXPIRE {key} 300" in block
    pointer = [c for c in block if c.startswith(f"SET {prefix}_checkpoint_latest:")]
    assert [p.split()[-1] for p in pointer] == [key], block
    assert any(c.startswith(f"EXPIRE {prefix}_checkpoint_latest:") for c in block), block


async def test_a_torn_save_heals_when_the_latest_checkpoint_is_read(
    redis_url: str, new_prefix: Prefixes, raw: Redis
) -> None:
    prefix = new_prefix()
    config: Any = {"configurable": {"thread_id": "t1"}}
    async with open_checkpointer(redis_url, key_prefix=prefix) as saver:
        graph = build(saver)
        await graph.ainvoke({"items": []}, config)
        paused = await graph.aget_state(config)
        assert paused.next == ("gate",)
        history = [s.config async for s in graph.aget_state_history(config)]
        newest, previous = history[0]["configurable"], history[1]["configurable"]
        assert newest["checkpoint_id"] == paused.config["configurable"]["checkpoint_id"]

        # What a process killed between the two writes of an earlier version left:
        # the newest document saved, the pointer still on the one before.
        pointer = f"{prefix}_checkpoint_latest:t1:__empty__"
        assert (
            await raw.get(pointer) == f"{prefix}_checkpoint:t1:__empty__:{newest['checkpoint_id']}"
        )
        await raw.set(pointer, f"{prefix}_checkpoint:t1:__empty__:{previous['checkpoint_id']}")

        got = await saver.aget_tuple(config)
        assert got is not None
        assert got.config["configurable"]["checkpoint_id"] == newest["checkpoint_id"]
        state = await graph.aget_state(config)
        assert state.next == ("gate",)
        assert state.values == paused.values
        assert [i.value for i in state.interrupts] == [i.value for i in paused.interrupts]
        assert (
            await raw.get(pointer) == f"{prefix}_checkpoint:t1:__empty__:{newest['checkpoint_id']}"
        )


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_a_step_and_its_sequence_number_take_one_round_trip(
    redis_url: str, new_prefix: Prefixes, encrypted: bool
) -> None:
    prefix = new_prefix()
    options: dict[str, Any] = {"encryption": ring("k1")} if encrypted else {}
    async with open_checkpointer(redis_url, key_prefix=prefix, **options) as saver:
        store = store_for(saver)
        await store.append_step("t1", {"kind": "warm-up"})  # loads the scripts
        await store.put_with_step("note", "warm", {"v": 0}, thread_id="t1", step={"kind": "w"})

        async def work() -> None:
            assert await store.append_step("t1", {"kind": "model"}) == 2
            index = await store.put_with_step(
                "note", "n1", {"v": 1}, thread_id="t1", step={"kind": "note"}
            )
            assert index == 3

        commands = await monitored(redis_url, work)
    sent = [c for cs in by_connection(commands).values() for c in cs if f"{prefix}_tether:" in c]
    assert [c.split()[0] for c in sent] == ["EVALSHA", "EVALSHA"], sent
    async with open_checkpointer(redis_url, key_prefix=prefix, **options) as reopened:
        steps = await store_for(reopened).steps("t1")
    assert [s["kind"] for s in steps] == ["warm-up", "w", "model", "note"]


async def test_concurrent_encrypted_steps_from_two_processes_all_land_in_order(
    redis_url: str, new_prefix: Prefixes
) -> None:
    # Each text is bound to its index, so a writer guesses the index before the
    # round trip; two stores (as two worker processes would) guess independently.
    prefix = new_prefix()
    keys = ring("k1")
    async with (
        open_checkpointer(redis_url, key_prefix=prefix, encryption=keys) as one,
        open_checkpointer(redis_url, key_prefix=prefix, encryption=keys) as two,
    ):
        stores = [store_for(one), store_for(two)]
        assert stores[0] is not stores[1]
        indexes = await asyncio.gather(
            *(stores[i % 2].append_step("t1", {"n": i}) for i in range(40)),
            *(
                stores[i % 2].put_with_step("note", f"k{i}", {}, thread_id="t1", step={"n": i})
                for i in range(40, 50)
            ),
        )
        again = await stores[1].put_with_step("note", "k40", {}, thread_id="t1", step={"n": 99})
        assert again is None
        last = await stores[0].append_step("t1", {"n": 50})
        steps = await stores[1].indexed_steps("t1")
    assert len(set(indexes)) == 50
    assert sorted(n["n"] for _, n in steps) == list(range(51))
    assert dict(steps) == {index: {"n": n} for n, index in enumerate([*indexes, last])}
    assert last == max(i for i, _ in steps)
