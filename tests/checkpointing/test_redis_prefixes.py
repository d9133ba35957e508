"""Redis key prefixes: refused when unsafe, and never sharing a namespace with another prefix."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from tests.approvals import graphs
from tests.checkpointing.conftest import Prefixes
from tether.approvals import get_approval, list_approvals
from tether.checkpointing._opener import open_checkpointer
from tether.checkpointing.redis import move_records
from tether.checkpointing.redis._prefixes import records_prefix, saver_prefixes
from tether.errors import ConfigurationError
from tether.store import store_for


@pytest.mark.parametrize(
    "bad", ["acme*", "ac?me", "[ab]", "a\\b", "a:b", "a b", "tab\t", "nl\n", "", "x]"]
)
async def test_unsafe_prefixes_are_refused_before_anything_is_written(
    redis_url: str, raw: Redis, bad: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        async with open_checkpointer(redis_url, key_prefix=bad):
            pass
    assert repr(bad) in str(refused.value)
    assert "glob characters" in str(refused.value)
    # Neither an index nor a key under the would-be namespaces.
    derived = (f"{bad}_checkpoint", f"{bad}_tether")
    assert not set(derived) & set(await raw.execute_command("FT._LIST"))
    assert not [k async for k in raw.scan_iter(count=1000) if k.startswith(derived)]


@pytest.mark.parametrize("bad", [7, b"acme"])
async def test_a_prefix_that_is_not_text_is_refused(redis_url: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="invalid Redis key_prefix"):
        async with open_checkpointer(redis_url, key_prefix=bad):
            pass


def test_every_derived_namespace_is_distinct_across_prefixes() -> None:
    prefixes = ["acme", "acme_", "acme__", "acme_checkpoint", "acme_tether", "a-b", "_", "ü"]

    def namespaces(prefix: str | None) -> set[str]:
        if prefix is None:  # upstream's names
            return {
                "checkpoint",
                "checkpoint_latest",
                "checkpoint_write",
                "write_keys_zset",
                "tether",
            }
        derived = saver_prefixes(prefix)
        cp, wp = derived["checkpoint_prefix"], derived["checkpoint_write_prefix"]
        return {cp, f"{cp}_latest", wp, f"{wp}_keys_zset", records_prefix(cp)}

    owned = {p: namespaces(p) for p in [None, *prefixes]}
    every = [ns for names in owned.values() for ns in names]
    assert len(every) == len(set(every))
    # A key is "<namespace>:<rest>", and no namespace holds ':', so distinct names never overlap.
    assert not any(":" in ns for ns in every)


async def test_prefixes_differing_by_a_trailing_underscore_are_isolated(
    redis_url: str, new_prefix: Prefixes
) -> None:
    acme = new_prefix()
    acme_ = f"{acme}_"
    async with (
        open_checkpointer(redis_url, key_prefix=acme) as a,
        open_checkpointer(redis_url, key_prefix=acme_) as b,
    ):
        ga, gb = graphs.gate_graph(a), graphs.gate_graph(b)
        config: Any = {"configurable": {"thread_id": "t1"}}
        await ga.ainvoke({"amount": 500, "log": []}, config)
        await gb.ainvoke({"amount": 700, "log": []}, config)
        [view_a] = await list_approvals(a, thread_id="t1")
        [view_b] = await list_approvals(b, thread_id="t1")
        assert view_a.request.args == {"to": "bob", "amount": 500}
        assert view_b.request.args == {"to": "bob", "amount": 700}
        assert (await get_approval(b, view_b.request.approval_id)).request.args["amount"] == 700

        await store_for(a).insert("note", "n1", {"by": "acme"}, thread_id="t1")
        assert await store_for(b).get("note", "n1") is None
        await store_for(b).insert("note", "n1", {"by": "acme_"}, thread_id="t1")
        steps_b = await store_for(b).steps("t1")

        await store_for(a).delete_thread("t1")
        await a.adelete_thread("t1")
        assert await list_approvals(a, thread_id="t1") == []
        assert await a.aget_tuple(config) is None
        assert [v.request.args for v in await list_approvals(b, thread_id="t1")] == [
            {"to": "bob", "amount": 700}
        ]
        note = await store_for(b).get("note", "n1")
        assert note is not None
        assert note.value == {"by": "acme_"}
        assert await store_for(b).steps("t1") == steps_b
        state = await gb.aget_state(config)
        assert state.next == ("pay",)


async def test_records_at_the_old_shared_place_refuse_the_prefix_until_moved(
    redis_url: str, new_prefix: Prefixes, raw: Redis
) -> None:
    # An earlier version kept the records of "X_" under "X_tether:", which is
    # where "X" keeps its records now: write them through "X" to lay them out.
    base = new_prefix()
    async with open_checkpointer(redis_url, key_prefix=base) as old:
        await store_for(old).insert("note", "n1", {"v": 1}, thread_id="t1")
        await store_for(old).append_step("t1", {"kind": "note"})

    with pytest.raises(ConfigurationError) as refused:
        async with open_checkpointer(redis_url, key_prefix=f"{base}_"):
            pass
    message = str(refused.value)
    assert f"{base}_tether:" in message
    assert f"{base}__tether:" in message
    assert "move_records" in message

    moved = await move_records(raw, f"{base}_tether", f"{base}__tether")
    assert moved > 0
    assert [k async for k in raw.scan_iter(match=f"{base}_tether:*")] == []
    async with open_checkpointer(redis_url, key_prefix=f"{base}_") as moved_to:
        note = await store_for(moved_to).get("note", "n1")
        assert note is not None
        assert note.value == {"v": 1}
        assert [r.key for r in await store_for(moved_to).list("note", thread_id="t1")] == ["n1"]
        assert await store_for(moved_to).steps("t1") == [{"kind": "note"}]
        await store_for(moved_to).delete_thread("t1")
        assert await store_for(moved_to).get("note", "n1") is None
