"""Staleness: a precondition changed while waiting voids the approval; a fresh request follows."""

from __future__ import annotations

import pytest

from tests.approvals import graphs
from tests.approvals.conftest import PauseFn
from tether.approvals import AlreadyDecidedError, get_approval


async def test_a_changed_version_voids_the_approval_and_asks_again(pause: PauseFn) -> None:
    paused = await pause(amount=500)
    graphs.VERSIONS["balance"] = 2  # the account changed while the request waited
    result = await paused.decide("approve")

    assert not result.finished
    assert len(result.pending) == 1
    fresh = result.pending[0]
    assert fresh["approval_id"] != paused.approval_id
    assert fresh["replaces"] == paused.approval_id
    assert fresh["revision"] == 1
    assert fresh["depends_on"] == {"balance": 2}
    assert fresh["observations"] == {"balance_cents": 200}  # fresh observations
    assert fresh["args_sha256"] == paused.args_sha256
    old = await get_approval(paused.saver, paused.approval_id)
    assert old.status == "voided"
    assert old.request.status_reason == "stale: balance changed"
    assert await paused.log() == []  # nothing ran on the void approval
    assert await paused.events() == ["requested", "decided", "voided", "requested"]

    with pytest.raises(AlreadyDecidedError, match="voided"):
        await paused.decide("approve")

    done = await paused.decide("approve", approval_id=fresh["approval_id"])
    assert done.finished
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]
    assert (await paused.events())[-2:] == ["decided", "cleared"]


async def test_a_rejection_is_not_stale_checked(pause: PauseFn) -> None:
    paused = await pause()
    graphs.VERSIONS["balance"] = 3
    result = await paused.decide("reject", by="alice", reason="no")
    assert result.finished
    assert (await paused.log())[0].startswith("reject:")
