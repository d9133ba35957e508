"""Settled approvals carried into a replay's scratch thread.

A replay runs a super-step again in a scratch thread, answering every model
call and tool call from its record. An approval gate in that super-step would
otherwise find no request under the scratch thread's approval id (the id is
derived from the thread), raise a new one and pause: the replay stopped
there. :func:`copy_settled` stores each settled request of the super-step's
tasks, with its decision, under the id the gate computes in the scratch
thread. The request is stored as it is (its own id, its own thread), so the
gate reads the run's decision under that id and answers exactly as it did in
the run: the same outcome, the same approval id in the tool's result. The
decision is copied too, so the expiry job never takes the copy for a request
nobody decided.

Only a replay uses it: nothing runs in a replay. A fork is a new run, and a
gate in it asks a person again.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals._storage import APPROVAL_KIND, DECISION_KIND, ApprovalRequest
from tether.approvals.hashing import approval_id_for, keyed_approval_id
from tether.store import store_for

__all__ = ["copy_settled"]


def _root_task(request: ApprovalRequest) -> str:
    """The task of the thread's own graph the request was made under (a subgraph's
    task sits inside one: its namespace starts ``node:<root task id>``)."""
    first = request.checkpoint_ns.split("|", 1)[0]
    return first.rsplit(":", 1)[-1] if first else request.task_id


async def copy_settled(
    saver: BaseCheckpointSaver[Any], source: str, target: str, task_ids: Collection[str]
) -> int:
    """Copy the decided approvals the tasks ``task_ids`` of ``source`` asked for into
    ``target``; how many were copied."""
    store = store_for(saver)
    keyed = await store.keyed_hash()
    copied = 0
    for record in await store.list(APPROVAL_KIND, thread_id=source):
        request = ApprovalRequest.from_dict(record.value)
        if _root_task(request) not in task_ids:
            continue
        decision = await store.get(DECISION_KIND, request.approval_id)
        if decision is None:  # still pending: the replay pauses there, as the run did
            continue
        where = (target, request.checkpoint_ns, request.key, request.revision)
        new_id = approval_id_for(*where) if keyed is None else keyed_approval_id(*where, keyed)
        await store.upsert(APPROVAL_KIND, new_id, dict(record.value), thread_id=target)
        await store.upsert(DECISION_KIND, new_id, dict(decision.value), thread_id=target)
        copied += 1
    return copied
