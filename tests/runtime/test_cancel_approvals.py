"""Cancelling a run that waits on an approval resolves the approval, with either action.

A rollback deletes the run's records, the approval's among them; it used to
delete them first and then fail to find the approval it was cancelling
(``UnknownApprovalError``, a 500 over HTTP), leaving no ``approval.cancelled``.
"""

from __future__ import annotations

import pytest

from tests.runtime.waiting import waiting_on_approval
from tests.runtime.workers import Workers
from tether.approvals import UnknownApprovalError, get_approval
from tether.runtime import Runtime


@pytest.mark.parametrize("action", ["interrupt", "rollback"])
async def test_cancelling_a_run_waiting_on_an_approval_cancels_the_approval(
    runtime: Runtime, workers: Workers, action: str
) -> None:
    workers.start(1)
    run_id = await waiting_on_approval(runtime, f"t-cancel-{action}")
    approval_id = (await runtime.get(run_id)).waiting_on[0].approval_id
    assert approval_id is not None
    run = await runtime.cancel(run_id, action=action, reason="not needed", wait=True)  # type: ignore[arg-type]
    assert run.status == "cancelled"
    kinds = [e.kind for e in await runtime.events(run_id)]
    assert kinds.count("approval.cancelled") == 1, kinds
    saver = await runtime.checkpointer()
    if action == "interrupt":
        view = await get_approval(saver, approval_id)
        assert view.status == "cancelled"
    else:  # the run's records are gone, the approval's with them
        with pytest.raises(UnknownApprovalError):
            await get_approval(saver, approval_id)
