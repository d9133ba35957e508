"""Replay of a run that went through an approval: the gate answers as it did in the run.

The approval id is derived from the thread, so in a replay's scratch thread the
gate found no request, raised a new one and paused: every gated run "diverged"
at its approval. The refund agent of ``tether demo``, on every backend, with
encryption off and on, after each kind of decision.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends import Backend
from tether.approvals import decide, list_approvals
from tether.checkpointing.encryption import KeyRing
from tether.debug import timeline
from tether.demo.graph import build_demo_graph
from tether.graphs._payments import FakePaymentsProvider
from tether.graphs._refund_scenario import CALLS_FILE, PAYMENTS_FILE, refund_input
from tether.graphs._scripted import read_calls

SUPERSTEPS = {"approve": 7, "edit": 7, "reject": 5}  # agent and tools, then the last answer


@pytest.mark.parametrize(
    ("decision", "encrypted"), [("approve", False), ("edit", True), ("reject", False)]
)
async def test_a_gated_run_replays_to_the_end_without_asking_anyone(
    backend: Backend, tmp_path: Path, decision: str, encrypted: bool
) -> None:
    world = tmp_path / "world"
    ring = KeyRing.from_spec(KeyRing.generate_spec("k1")) if encrypted else False
    async with backend.open(encryption=ring) as saver:
        graph = build_demo_graph(checkpointer=saver, workdir=world)
        config = {"configurable": {"thread_id": "t1"}}
        await graph.ainvoke(refund_input(), config)
        (view,) = await list_approvals(saver)
        edited = {**view.request.args, "amount_cents": 2500} if decision == "edit" else None
        await decide(
            saver, "t1", view.request.approval_id, decision,
            graph=graph, by="dana", roles=["support-lead"],
            args_sha256=view.request.args_sha256, edited_args=edited,
        )  # fmt: skip
        assert not (await graph.aget_state(config)).next  # the run finished
        calls = len(read_calls(world / CALLS_FILE))
        refunds = FakePaymentsProvider(world / PAYMENTS_FILE).counts().refund_attempts

        tl = await timeline(
            saver, "t1", graph=lambda s: build_demo_graph(checkpointer=s, workdir=world)
        )
        result = await tl.replay()

        assert result.ok, result
        assert result.supersteps == SUPERSTEPS[decision]
        assert len(read_calls(world / CALLS_FILE)) == calls  # no model was asked
        assert FakePaymentsProvider(world / PAYMENTS_FILE).counts().refund_attempts == refunds
        (still,) = await list_approvals(saver, status=None)  # scratch threads left none
        assert still.request.approval_id == view.request.approval_id
