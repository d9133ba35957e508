"""A worker killed while it continues a decided compensation: another finishes it, undoing once.

Real ``tether worker`` processes; the first is killed (SIGKILL, by the crash
harness) at a compensation boundary of the continuation run, and the second
takes the run over when the lease expires.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.workers import Workers
from tether.approvals import get_approval
from tether.compensation import RUN_POLICY_KEY
from tether.graphs._refund_saga import saga_effects
from tether.graphs._refund_scenario import PAYMENTS_FILE, refund_input
from tether.runtime.api import Runtime
from tether.runtime.compensations import continuation_id, rollback_id


def _reversal_attempts(workdir: Path) -> int:
    with sqlite3.connect(workdir / PAYMENTS_FILE) as db:
        (n,) = db.execute("SELECT COUNT(*) FROM attempts WHERE kind = 'reversal'").fetchone()
    return int(n)


@pytest.mark.parametrize("point", ["before", "after"])
async def test_a_worker_killed_mid_continuation_leaves_it_to_another_that_undoes_once(
    runtime: Runtime, workers: Workers, point: str
) -> None:
    crashing = workers.start(1, extra_env={"TETHER_CRASH_AT": f"compensation.{point}:1"})[0]
    thread = f"saga-crash-{point}"
    config = {"configurable": {RUN_POLICY_KEY: "ask"}}
    run = await runtime.create("refund_saga", thread_id=thread, input=refund_input(), config=config)
    failed = await runtime.wait(run.run_id, timeout=60)
    assert failed.error is not None
    asked = failed.error["compensation"]["awaiting"]
    assert len(asked) == 1, failed.error  # the whole outcome when it is not one request
    (awaiting,) = asked
    request = (await get_approval(await runtime.checkpointer(), awaiting["approval_id"])).request
    await runtime.decide(
        thread,
        request.approval_id,
        "approve",
        by="dana",
        roles=["support-lead"],
        args_sha256=request.args_sha256,
    )
    assert workers.procs[crashing].wait(60) is not None  # killed at the boundary
    workers.start(1)
    continuation = await runtime.wait(continuation_id(request.approval_id), timeout=60)
    assert continuation.status == "success", continuation
    started = [e for e in await runtime.events(continuation.run_id) if e.kind == "run.started"]
    assert started[-1].data.get("took_over_from") == "w0"
    workdir = workers.workdir / "refund_saga"
    # Killed before the undo: it runs once, on the successor. Killed after the undo was
    # recorded: the successor finds it recorded and never calls the provider again.
    assert _reversal_attempts(workdir) == 1
    assert saga_effects(workdir) == {"refunds": 1, "reversals": 1, "emails": 2}
    after = await runtime.get(failed.run_id)
    assert after.error is not None
    assert after.error["compensation"]["undone"] == ["issue_refund"]


@pytest.mark.parametrize("point", ["before", "after"])
async def test_a_worker_killed_mid_rollback_leaves_it_to_another_that_undoes_once(
    runtime: Runtime, workers: Workers, point: str
) -> None:
    """The rollback run of a paused run cancelled with rollback, killed at its first undo."""
    crashing = workers.start(1, extra_env={"TETHER_CRASH_AT": f"compensation.{point}:1"})[0]
    thread = f"rollback-crash-{point}"
    run = await runtime.create("saga_asks", thread_id=thread, input={"messages": []})
    assert (await runtime.wait(run.run_id, timeout=60)).status == "interrupted"
    await runtime.cancel(run.run_id, action="rollback", reason="withdrawn")
    assert workers.procs[crashing].wait(60) is not None  # killed at the boundary
    workers.start(1)
    rolled = await runtime.wait(rollback_id(run.run_id), timeout=60)
    assert rolled.status == "success", rolled
    with sqlite3.connect(workers.workdir / "world.db") as db:
        kinds = [k for (k,) in db.execute("SELECT kind FROM effects ORDER BY rowid")]
    assert kinds == ["charge", "email", "undo-email ada@example.com", "undo-charge 4200"]
    after = await runtime.get(run.run_id)
    assert after.ended_reason is not None
    assert "undone: email, charge" in after.ended_reason
    saver = await runtime.checkpointer()
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    assert await saver.aget_tuple(config) is None
