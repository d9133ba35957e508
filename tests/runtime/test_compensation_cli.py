"""``tether approvals reject|approve --runtime`` on a compensation request, as a person types it."""

from __future__ import annotations

import json

from tests.runtime.test_cli import ok
from tests.runtime.workers import Workers
from tether.compensation import RUN_POLICY_KEY
from tether.graphs._refund_saga import saga_effects
from tether.graphs._refund_scenario import refund_input
from tether.runtime import Runtime
from tether.runtime.compensations import continuation_id


async def test_a_compensation_request_is_decided_from_the_command_line(
    runtime: Runtime, runtime_url: str, workers: Workers
) -> None:
    workers.start(1)
    config = {"configurable": {RUN_POLICY_KEY: "ask"}}
    run = await runtime.create(
        "refund_saga", thread_id="cli-saga", input=refund_input(), config=config
    )
    failed = await runtime.wait(run.run_id, timeout=60)
    assert failed.status == "error", failed
    listed = json.loads(ok("approvals", "list", "--url", runtime_url, "--json", url=runtime_url))
    (approval,) = [a for a in listed if a["thread_id"] == "cli-saga"]
    assert approval["action"] == "compensate:issue_refund"
    decided = ok(
        "approvals", "reject", approval["approval_id"], "--url", runtime_url, "--runtime",
        "--by", "dana", "--role", "support-lead", "--args-sha256", approval["args_sha256"],
        "--reason", "refunded by hand", url=runtime_url,
    )  # fmt: skip
    continuation = continuation_id(approval["approval_id"])
    assert f"a worker continues the compensation in run {continuation}" in decided
    done = await runtime.wait(continuation, timeout=60)
    assert done.status == "success", done
    assert saga_effects(workers.workdir / "refund_saga")["reversals"] == 0
    after = await runtime.get(failed.run_id)
    assert after.error is not None
    (left,) = [e for e in after.error["compensation"]["not_undone"] if e["tool"] == "issue_refund"]
    assert left["why"] == "left by dana (reject: refunded by hand)"
