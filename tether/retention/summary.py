"""The audit summary written before a thread is deleted, kept longer than its state.

A summary holds hashes and counts, never values: nothing a user typed, no
model output, no tool argument. Its fields (version 1):

- ``thread_id``, ``tenant_id``, ``thread_created_at``, ``last_activity_at``,
  ``written_at``, ``reason`` (the rule that deleted it);
- ``runs``: each run's id, assistant, graph, status, created, started and ended;
- ``steps``: the step log's length per kind (``total`` too); ``model_calls``;
  ``tokens`` (``input``, ``output``, ``total``) and ``cost_usd`` summed over
  the model steps;
- ``approvals``: each request's id, action, requested and decided times, the
  SHA-256 of its arguments and of its observations, the SHA-256 of who decided
  (``decided_by_sha256``: check a name against it, it does not reveal one) and
  the outcome (``approved``, ``rejected``, ``edited``, ``expired``, …);
- ``tool_effects``: each durable tool call's tool, idempotency key, arguments
  hash and state;
- ``step_chain_head``: the head of the thread's step-log hash chain
  (:func:`tether.steps.chain_head`: ``{"index", "link"}``), or ``None`` when no
  step is chained. ``tether audit verify`` checks a log against it, so a log
  later cut short or deleted whole no longer reaches it.
- ``summary_sha256``: the SHA-256 of the canonical JSON of every other field.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals import ApprovalView, canonical_json, list_approvals
from tether.runtime.models import Run
from tether.runtime.store import RunStore, ThreadActivity
from tether.store import store_for

__all__ = ["SUMMARY_VERSION", "build_summary", "sha256_text", "summary_id", "with_digest"]

SUMMARY_VERSION = 1
_PAGE = 100


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` in UTF-8."""
    return hashlib.sha256(text.encode()).hexdigest()


def summary_id(thread: ThreadActivity) -> str:
    """One summary per thread *instance*: its id and its creation time."""
    return sha256_text(f"{thread.thread_id}\n{thread.created_at.isoformat()}")


def with_digest(doc: dict[str, Any], field: str) -> dict[str, Any]:
    """``doc`` plus ``field``: the SHA-256 of the canonical JSON of the rest."""
    body = {k: v for k, v in doc.items() if k != field}
    return {**body, field: sha256_text(canonical_json(body))}


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


async def _runs(store: RunStore, thread: ThreadActivity) -> list[Run]:
    runs: list[Run] = []
    while True:
        page = await store.list_runs(
            tenant=thread.tenant_id, thread_id=thread.thread_id, limit=_PAGE, offset=len(runs)
        )
        runs += page
        if len(page) < _PAGE:
            return sorted(runs, key=lambda r: r.seq)


def _run_entry(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "assistant_id": run.assistant_id,
        "graph_id": run.graph_id,
        "status": run.status,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "ended_at": _iso(run.ended_at),
    }


def _step_counts(steps: list[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, int] = {}
    tokens = {"input": 0, "output": 0, "total": 0}
    cost = 0.0
    for step in steps:
        kind = str(step.get("kind", ""))
        by_kind[kind] = by_kind.get(kind, 0) + 1
        if kind == "model":
            usage = step.get("usage") or {}
            tokens["input"] += int(usage.get("input_tokens", 0))
            tokens["output"] += int(usage.get("output_tokens", 0))
            tokens["total"] += int(usage.get("total_tokens", 0))
            cost += float(step.get("cost_usd") or 0.0)
    return {
        "steps": {"total": len(steps), **dict(sorted(by_kind.items()))},
        "model_calls": by_kind.get("model", 0),
        "tokens": tokens,
        "cost_usd": round(cost, 6),
    }


def _approval_entry(view: ApprovalView) -> dict[str, Any]:
    request, decision = view.request, view.decision or {}
    who = decision.get("by")
    return {
        "approval_id": request.approval_id,
        "action": request.action,
        "requested_at": request.requested_at,
        "args_sha256": request.args_sha256,
        "observations_sha256": request.observations_sha256,
        "outcome": view.status,
        "decided_at": decision.get("at"),
        "decided_by_sha256": None if who is None else sha256_text(str(who)),
    }


async def build_summary(
    store: RunStore,
    saver: BaseCheckpointSaver[Any],
    thread: ThreadActivity,
    *,
    reason: str,
    now: datetime,
) -> dict[str, Any]:
    """The audit summary of ``thread`` as stored now (see the module docstring)."""
    records = store_for(saver)
    steps = await records.steps(thread.thread_id)
    approvals = await list_approvals(saver, thread_id=thread.thread_id, status=None)
    tools = await records.list("tool", thread_id=thread.thread_id)
    head = await records.chain_head(thread.thread_id)
    doc: dict[str, Any] = {
        "version": SUMMARY_VERSION,
        "thread_id": thread.thread_id,
        "tenant_id": thread.tenant_id,
        "thread_created_at": _iso(thread.created_at),
        "last_activity_at": _iso(thread.updated_at),
        "written_at": _iso(now),
        "reason": reason,
        "runs": [_run_entry(r) for r in await _runs(store, thread)],
        **_step_counts(steps),
        "approvals": [_approval_entry(v) for v in approvals],
        "tool_effects": [
            {
                "tool": t.value.get("tool"),
                "idempotency_key": t.value.get("idempotency_key"),
                "args_hash": t.value.get("args_hash"),
                "state": t.value.get("state"),
            }
            for t in tools
        ],
        "step_chain_head": None if head is None else {"index": head.index, "link": head.link},
    }
    return with_digest(doc, "summary_sha256")
