"""What a process without the graph may ask about a thread's compensation (e.g. a runtime).

Deciding a compensation request in a runtime happens in a process that may not
have the graph (a web server, the CLI): it only needs to know whether a request
is a compensation request, whether the compensation still waits on it, and
which run it compensates. All three read stored records only; continuing the
compensation is left to a process that has the graph (a worker).
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals import ApprovalRequest
from tether.compensation._flow import COMPENSATION_KIND, RUN_KIND, pending_flow, run_key
from tether.compensation._io import Flow, run
from tether.compensation._requests import ACTION_PREFIX
from tether.store import operations as ops

__all__ = [
    "compensated_run",
    "compensation_began",
    "compensation_waits_on",
    "is_compensation_request",
    "run_of",
]


def is_compensation_request(request: ApprovalRequest) -> bool:
    """Whether ``request`` was raised by compensation (action ``compensate:<tool>``)."""
    return request.action.startswith(ACTION_PREFIX)


async def compensation_waits_on(
    checkpointer: BaseCheckpointSaver[Any], request: ApprovalRequest
) -> bool:
    """Whether the compensation of ``request``'s thread waits on ``request`` (no graph needed)."""
    return await run(pending_flow(request.key, request.approval_id), checkpointer)


async def compensation_began(
    checkpointer: BaseCheckpointSaver[Any], thread_id: str, run_id: str
) -> bool:
    """Whether a compensation pass of run ``run_id`` ever began on ``thread_id`` (its first
    pass stores what it was told before it undoes anything; no graph needed)."""
    return await run(_began(thread_id, run_id), checkpointer)


def _began(thread_id: str, run_id: str) -> Flow[bool]:
    return (yield ops.Get(RUN_KIND, run_key(thread_id, run_id))) is not None


def run_of(request: ApprovalRequest) -> Flow[str | None]:
    state = yield ops.Get(COMPENSATION_KIND, request.key)
    if state is not None and "run_id" in state.value:
        found = state.value["run_id"]
    else:  # written by an earlier version, which remembered one run per thread
        stored = yield ops.Get(RUN_KIND, request.thread_id)
        found = None if stored is None else stored.value.get("run_id")
    return str(found) if found else None


async def compensated_run(
    checkpointer: BaseCheckpointSaver[Any], request: ApprovalRequest
) -> str | None:
    """The run whose compensation raised ``request`` (``None``: a pass not of a run's).

    Each run's compensation on a thread is its own: a request of one is
    decided for that run, whatever else ran on the thread since.
    """
    return await run(run_of(request), checkpointer)
