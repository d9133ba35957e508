"""Runs brought to a point a test starts from, through real workers."""

from __future__ import annotations

from typing import Any

from tether.runtime import Runtime


async def waiting_on_approval(runtime: Runtime, thread_id: str, **options: Any) -> str:
    """A ``pause`` run, past its plain interrupt, waiting on its tether approval."""
    run = await runtime.create("pause", thread_id=thread_id, input={"n": 1}, **options)
    assert (await runtime.wait(run.run_id, timeout=60)).status == "interrupted"
    await runtime.resume(run.run_id, {"resume": "yes"})
    waiting = await runtime.wait(run.run_id, timeout=60)
    assert waiting.status == "interrupted", waiting
    assert waiting.waiting_on[0].approval_id is not None
    return run.run_id
