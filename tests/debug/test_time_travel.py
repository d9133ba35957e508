"""Replay, fork and what-if on the refund agent: every backend, encryption off and on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.backends import Backend
from tests.debug.refund import builder, model_calls, payments, run_refund
from tether.checkpointing.encryption import KeyRing
from tether.debug import DebugError, timeline
from tether.steps import read_steps
from tether.store import store_for


@pytest.fixture(params=["plain", "encrypted"])
def encryption(request: pytest.FixtureRequest) -> KeyRing | bool:
    return KeyRing.from_spec(KeyRing.generate_spec("k1")) if request.param == "encrypted" else False


async def test_replay_fork_and_what_if(
    backend: Backend, encryption: KeyRing | bool, tmp_path: Path
) -> None:
    async with backend.open(encryption=encryption) as saver:
        await run_refund(saver, tmp_path, "t1")
        tl = await timeline(saver, "t1", graph=builder(tmp_path))
        assert [e.kind for e in tl.entries] == ["model", "tool"] * 3 + ["model"]
        assert model_calls(tmp_path) == 4
        assert payments(tmp_path).refunds == 1

        # Replay: every super-step again, from the log only.
        result = await tl.replay()
        assert result.ok
        assert result.supersteps == 7
        assert model_calls(tmp_path) == 4
        assert payments(tmp_path).refund_attempts == 1
        assert payments(tmp_path).email_attempts == 1

        # Fork at the refund, with the proposed amount edited.
        refund = tl.find("tool", text="issue_refund")[0]
        proposed = tl.state(refund.checkpoint_id)["messages"][-1]
        call = proposed.tool_calls[0]
        edited = proposed.model_copy(
            update={"tool_calls": [{**call, "args": {**call["args"], "amount_cents": 2000}}]}
        )
        fork = await tl.fork(refund.step, update={"messages": [edited]}, as_node="agent")
        copied = await read_steps(saver, fork.thread_id)
        assert [s.output for s in copied] == [s.output for s in tl.steps[:3]]
        assert all(s.detail["copied_from"][0] == "t1" for s in copied)
        fork = await fork.run()
        assert model_calls(tmp_path) == 6  # only the two answers after the refund
        refunded = json.loads(fork.find("tool", text="issue_refund")[0].output)
        assert refunded["amount_cents"] == 2000
        assert payments(tmp_path).refunds == 2

        # What-if: the order lookup reports another amount.
        lookup = tl.find("tool", text="lookup_order")[0]
        order = {**json.loads(lookup.output), "amount_cents": 1500}
        alt = await tl.what_if(lookup.step, json.dumps(order))
        assert model_calls(tmp_path) == 9  # propose, email, report: nothing before the lookup
        assert json.loads(alt.entries[1].output) == order
        issued = json.loads(alt.find("tool", text="issue_refund")[0].output)
        assert issued["amount_cents"] == 1500
        counts = payments(tmp_path)
        assert (counts.refund_attempts, counts.refunds) == (3, 3)
        assert tl.compare(alt).channels == ["messages"]

        if encryption:
            raw = await store_for(saver).driver.list("tool", alt.thread_id)
            assert raw
            assert all(r.payload.startswith("enc1:") for r in raw)
            assert all("1500" not in r.payload for r in raw)


async def test_a_fork_or_what_if_never_writes_into_a_thread_that_exists(
    backend: Backend, tmp_path: Path
) -> None:
    async with backend.open() as saver:
        await run_refund(saver, tmp_path, "t1")
        await run_refund(saver, tmp_path, "victim")
        tl = await timeline(saver, "t1", graph=builder(tmp_path))
        victim = await timeline(saver, "victim", graph=builder(tmp_path))
        lookup = tl.find("tool", text="lookup_order")[0]
        order = json.dumps({**json.loads(lookup.output), "amount_cents": 1500})
        for made in (
            tl.fork(lookup.step, thread_id="victim"),
            tl.what_if(lookup.step, order, thread_id="victim"),
        ):
            with pytest.raises(DebugError, match="thread 'victim' already exists"):
                await made
        for bad, problem in (("a\x00b", "NUL"), ("", "non-empty")):
            with pytest.raises(DebugError, match=problem):
                await tl.fork(lookup.step, thread_id=bad)
        after = await timeline(saver, "victim", graph=builder(tmp_path))
        assert [c.checkpoint_id for c in after.checkpoints] == [
            c.checkpoint_id for c in victim.checkpoints
        ]
        assert [s.index for s in after.steps] == [s.index for s in victim.steps]
        assert model_calls(tmp_path) == 8  # the two runs; the refused branches ran nothing
