"""Compensating a run, written once as a flow: newest effect first, each undo a durable step.

For each effect (see :mod:`._plan`), newest first, the compensation record
(kind ``compensation``, keyed like the effect's own record) says how far it got:

* none: decide by policy. ``none``, no ``compensate``, or an effect whose
  outcome is unknown: *not undone*. ``ask``: raise a request and wait.
  ``auto``: claim, undo, record;
* ``claimed``: another pass is undoing it now (its process is alive: it is
  reported as waiting and nothing else is done), or a process died between
  claim and result: undo again, with the same idempotency key (``compensate``
  must honour it). A claim names its pass's host, process and pass; a claim
  from this host is the pass's while its process lives (and, in this process,
  while the pass runs), one from another host for :data:`CLAIM_LEASE_S`;
* ``asking`` / ``failed``: a request is open; its decision (approve, edit:
  undo; reject, expire: leave it) is read, or the effect still waits;
* ``done`` / ``left``: settled; reported as it was.

Like a durable tool, an undo is claimed before it runs (crash point
``compensation.before``) and its result is recorded, with a ``compensation``
step naming the tool step it undoes, before the next (crash point
``compensation.after``). An undo that raises is never retried on its own: it
becomes a request to a person (:mod:`._requests`). Undoing stops at the first
effect that waits on a person: an earlier effect is undone only after every
later one is settled.

Compensation records, their steps and their requests belong to no run
(``run_id=""``): a rollback deletes the run's records and checkpoints, and the
account of what was undone must outlive it. Each names the run whose effects
its pass compensates (``run_id`` of :func:`compensate`), so that a person's
decision continues that run's compensation, whatever ran on the thread since;
the reason and policy a run's first pass was given are kept per run.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from tether.approvals import APPROVAL_KIND, DECISION_KIND
from tether.boundaries import boundary
from tether.compensation._io import Flow, ReadSteps, Undo
from tether.compensation._plan import Effect, effects_of
from tether.compensation._report import CompensationReport, EffectOutcome, EffectStatus
from tether.compensation._requests import (
    LEAVING,
    RETRYING,
    edit_json_schema,
    request_for,
    shown,
)
from tether.compensation._settings import Compensation
from tether.steps import DurableTool
from tether.store import Record
from tether.store import operations as ops

__all__ = [
    "ATTEMPT_KIND",
    "CLAIM_LEASE_S",
    "COMPENSATION_KIND",
    "RUN_KIND",
    "Context",
    "compensation_flow",
    "live_pass",
    "pending_flow",
    "run_key",
]

COMPENSATION_KIND = "compensation"
RUN_KIND = "compensation_run"
ATTEMPT_KIND = "compensation_attempt"  # one record per retried undo: the pass that won it
_NO_RUN = ""  # compensation outlives a rollback of the run (see the module docstring)
_WORKER = f"{socket.gethostname()}:{os.getpid()}"
CLAIM_LEASE_S = 300.0
"""How long a claim made on another host is taken for a pass still undoing (its process
cannot be asked); after that the undo runs again, with the same idempotency key."""
_live: set[str] = set()  # the passes running in this process


@dataclass(frozen=True)
class Context:
    """One compensation pass over a thread."""

    settings: Compensation
    tools: dict[str, DurableTool]
    thread_id: str
    reason: str | None
    run_policy: str | None
    run_id: str | None
    resumed: tuple[str, ...] = ()  # runs ``run_id`` resumed: their effects are its own
    pass_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def runs(self) -> tuple[str, ...] | None:
        """The runs whose effects this pass compensates (``None``: every run's)."""
        return None if self.run_id is None else (self.run_id, *self.resumed)

    def policy_for(self, effect: Effect) -> str:
        tool = self.tools.get(effect.tool)
        own = tool.compensation if tool is not None else effect.policy
        return self.run_policy or own or self.settings.policy


def compensation_flow(ctx: Context) -> Flow[CompensationReport]:
    """Compensate the thread's run (or continue doing so) and report every effect."""
    ctx = yield from _remembered(ctx)
    records: list[Record] = yield ops.List("tool", ctx.thread_id)
    steps = yield ReadSteps(ctx.thread_id)
    states = {r.key: r for r in (yield ops.List(COMPENSATION_KIND, ctx.thread_id))}
    outcomes: list[EffectOutcome] = []
    blocked: EffectOutcome | None = None
    for effect in effects_of(records, steps, ctx.tools, ctx.runs):
        if blocked is not None:
            outcomes.append(_outcome(effect, "waiting", f"after {_effect_after(blocked)}"))
            continue
        outcome = yield from _settle(ctx, effect, states.get(effect.key))
        outcomes.append(outcome)
        if outcome.status not in ("undone", "not undone"):
            blocked = outcome
    return CompensationReport(ctx.thread_id, ctx.reason or "", outcomes)


def _effect_after(blocked: EffectOutcome) -> str:
    """Why an older effect waits: the newer one ``blocked`` is not settled yet."""
    if blocked.status == "awaiting a person":
        return f"{blocked.tool}, which awaits a person"
    return f"{blocked.tool}, which another pass is undoing"


@contextmanager
def live_pass(ctx: Context) -> Iterator[None]:
    """While the block runs, this process's claims made by ``ctx``'s pass are in progress."""
    _live.add(ctx.pass_id)
    try:
        yield
    finally:
        _live.discard(ctx.pass_id)


def _owner(ctx: Context) -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "pass": ctx.pass_id}


def _in_progress(claim: dict[str, Any]) -> bool:
    """Whether the pass that made ``claim`` may still be running (see the module)."""
    owner = claim.get("owner")
    if not isinstance(owner, dict):
        return False  # made by an earlier version: its pass is gone
    if owner.get("host") != socket.gethostname():
        return time.time() < float(claim.get("claimed_at") or 0) + CLAIM_LEASE_S
    if owner.get("pid") == os.getpid():
        return owner.get("pass") in _live
    return _process_alive(owner.get("pid"))


def _process_alive(pid: Any) -> bool:
    """Whether process ``pid`` of this host runs (a zombie does not)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _busy(effect: Effect, claim: dict[str, Any]) -> EffectOutcome:
    owner = claim.get("owner") or {}
    who = f"{owner.get('host')}:{owner.get('pid')}"
    return _outcome(effect, "waiting", f"another pass ({who}) is undoing it now")


def run_key(thread_id: str, run_id: str | None) -> str:
    """The key of what a run's first pass was told (the thread's own, for no run)."""
    return thread_id if run_id is None else json.dumps([thread_id, run_id])


def pending_flow(key: str, approval_id: str) -> Flow[bool]:
    """Whether the effect under ``key`` waits on the request ``approval_id``."""
    record = yield ops.Get(COMPENSATION_KIND, key)
    if record is None:
        return False
    value = record.value
    return value.get("state") in ("asking", "failed") and value.get("approval_id") == approval_id


def _remembered(ctx: Context) -> Flow[Context]:
    """The run's reason and policy: given now, or as its first pass stored them.

    Kept per run (a pass of another run, or of a run id that matches nothing,
    leaves them alone); a pass without a run id continues the thread's last
    such pass, or the run an earlier version remembered for the thread.
    """
    key = run_key(ctx.thread_id, ctx.run_id)
    stored = yield ops.Get(RUN_KIND, key)
    if stored is None and ctx.run_id is not None:  # remembered under the thread (older)
        older = yield ops.Get(RUN_KIND, ctx.thread_id)
        if older is not None and older.value.get("run_id") == ctx.run_id:
            stored = older
    if stored is not None:
        first = stored.value
        return replace(
            ctx,
            reason=first.get("reason") or ctx.reason,
            run_policy=first.get("run_policy"),
            run_id=first.get("run_id") if ctx.run_id is None else ctx.run_id,
            resumed=tuple(first.get("resumed") or ctx.resumed),
        )
    value = {
        "reason": ctx.reason or "",
        "run_policy": ctx.run_policy,
        "run_id": ctx.run_id,
        "resumed": list(ctx.resumed),
    }
    yield ops.Upsert(RUN_KIND, key, value, ctx.thread_id, _NO_RUN)
    return ctx


def _settle(ctx: Context, effect: Effect, record: Record | None) -> Flow[EffectOutcome]:
    value = None if record is None else record.value
    state = None if value is None else value.get("state")
    if value is None or state is None:
        return (yield from _first(ctx, effect))
    approval_id = value.get("approval_id")
    if state == "done":
        return _outcome(effect, "undone", "undone", approval_id, value.get("output"))
    if state == "left":
        return _outcome(effect, "not undone", str(value.get("why", "")), approval_id)
    if state == "claimed":
        return (yield from _take_over(ctx, effect, value))
    return (yield from _decided(ctx, effect, value))


def _take_over(ctx: Context, effect: Effect, value: dict[str, Any]) -> Flow[EffectOutcome]:
    """An undo claimed and never recorded: still being undone, or its pass died."""
    if _in_progress(value):
        return _busy(effect, value)
    # Its pass died between claim and result: the same key again, as this pass's. Of
    # the passes that find it dead, the one that records taking it over undoes.
    claimed = {**value, "owner": _owner(ctx), "claimed_at": time.time()}
    takeover = json.dumps([effect.key, "takeover", value.get("owner"), value.get("claimed_at")])
    if not (yield ops.Insert(ATTEMPT_KIND, takeover, claimed, ctx.thread_id, _NO_RUN)):
        return (yield from _taken_over(ctx, effect, takeover))
    yield ops.Upsert(COMPENSATION_KIND, effect.key, claimed, ctx.thread_id, _NO_RUN)
    return (
        yield from _undo(
            ctx, effect, args=value["args"], attempt=int(value["attempt"]), claimed=claimed
        )
    )


def _taken_over(ctx: Context, effect: Effect, takeover: str) -> Flow[EffectOutcome]:
    """Another pass took the dead claim over first: its outcome, once it has one."""
    found = yield ops.Get(COMPENSATION_KIND, effect.key)
    if found is not None and found.value.get("state") not in (None, "claimed"):
        return (yield from _settle(ctx, effect, found))
    winner = yield ops.Get(ATTEMPT_KIND, takeover)
    return _busy(effect, {} if winner is None else winner.value)


def _first(ctx: Context, effect: Effect) -> Flow[EffectOutcome]:
    if not effect.finished:
        return _outcome(
            effect,
            "not undone",
            "its outcome is unknown (the call never recorded a result): check it by hand",
        )
    policy = ctx.policy_for(effect)
    if policy == "none":
        return _outcome(effect, "not undone", "compensation policy 'none'")
    if not effect.undo:
        return _outcome(effect, "not undone", _why_no_undo(ctx, effect))
    if policy == "ask":
        return (yield from _ask(ctx, effect, stage="ask", attempt=1, args=effect.args or {}))
    return (yield from _undo(ctx, effect, args=effect.args or {}, attempt=1))


def _why_no_undo(ctx: Context, effect: Effect) -> str:
    if effect.tool not in ctx.tools:
        return f"no durable tool named {effect.tool!r} is known to compensating()"
    if effect.args is None:
        return "its arguments were not recorded (recorded by an older version)"
    return f"{effect.tool} declares no compensate"


def _decided(ctx: Context, effect: Effect, value: dict[str, Any]) -> Flow[EffectOutcome]:
    """An open request: its decision, if a person made one, says what happens."""
    approval_id = str(value["approval_id"])
    decision = yield ops.Get(DECISION_KIND, approval_id)
    if decision is None:
        why = (
            "a person decides whether to undo it"
            if value["state"] == "asking"
            else str(value.get("error", "the undo failed"))
        )
        return _outcome(effect, "awaiting a person", why, approval_id)
    doc = decision.value
    attempt = int(value["attempt"]) + (1 if value["state"] == "failed" else 0)
    if doc["decision"] in RETRYING:
        edited = doc.get("args") if doc["decision"] == "edit" else None
        args = edited if isinstance(edited, dict) else value["args"]
        return (yield from _undo(ctx, effect, args=args, attempt=attempt, approval_id=approval_id))
    kind = doc["decision"] if doc["decision"] in LEAVING else "reject"
    why = f"left by {doc.get('by')} ({kind}" + (f": {doc['reason']})" if doc.get("reason") else ")")
    left = {**value, "state": "left", "why": why, "decision": kind}
    step = _step(effect, left, "left")
    yield ops.PutWithStep(
        COMPENSATION_KIND, effect.key, left, ctx.thread_id, step, replace=True, run_id=_NO_RUN
    )
    return _outcome(effect, "not undone", why, approval_id)


def _ask(
    ctx: Context,
    effect: Effect,
    *,
    stage: str,
    attempt: int,
    args: dict[str, Any],
    error: str | None = None,
) -> Flow[EffectOutcome]:
    request = request_for(
        ctx.settings,
        ctx.thread_id,
        effect,
        stage=stage,
        attempt=attempt,
        reason=ctx.reason or "",
        error=error,
        args=args,
        args_json_schema=edit_json_schema(ctx.tools.get(effect.tool)),
    )
    # The request first: a state naming a request that was never stored would wait forever.
    yield ops.Insert(APPROVAL_KIND, request.approval_id, request.to_dict(), ctx.thread_id, _NO_RUN)
    value = {
        **_base(ctx, effect, args, attempt),
        "state": "asking" if stage == "ask" else "failed",
        "approval_id": request.approval_id,
        "error": error,
    }
    step = _step(effect, value, "asked" if stage == "ask" else "failed")
    yield ops.PutWithStep(
        COMPENSATION_KIND, effect.key, value, ctx.thread_id, step, replace=True, run_id=_NO_RUN
    )
    return _outcome(effect, "awaiting a person", request.why, request.approval_id)


def _undo(
    ctx: Context,
    effect: Effect,
    *,
    args: dict[str, Any],
    attempt: int,
    claimed: dict[str, Any] | None = None,
    approval_id: str | None = None,
) -> Flow[EffectOutcome]:
    """Claim, undo, record: the undo runs at most once per claim unless a process dies."""
    tool = ctx.tools.get(effect.tool)
    if tool is None or tool.compensate is None:
        return _outcome(effect, "not undone", _why_no_undo(ctx, effect))
    claim = claimed
    if claim is None:
        claim = {
            **_base(ctx, effect, args, attempt),
            "state": "claimed",
            "approval_id": approval_id,
        }
        if attempt == 1 and approval_id is None:
            if not (yield ops.Insert(COMPENSATION_KIND, effect.key, claim, ctx.thread_id, _NO_RUN)):
                found = yield ops.Get(COMPENSATION_KIND, effect.key)  # another pass got there
                return (yield from _settle(ctx, effect, found))
        else:
            # A decided request: of the passes that read it, the one that inserts the
            # attempt's record undoes; the others see it in progress (or its pass dead).
            attempt_key = json.dumps([effect.key, attempt, approval_id])
            won = yield ops.Insert(ATTEMPT_KIND, attempt_key, claim, ctx.thread_id, _NO_RUN)
            if not won:
                other = yield ops.Get(ATTEMPT_KIND, attempt_key)
                if other is not None and _in_progress(other.value):
                    return _busy(effect, other.value)
            yield ops.Upsert(COMPENSATION_KIND, effect.key, claim, ctx.thread_id, _NO_RUN)
    detail = {
        "key": effect.key,
        "tool": effect.tool,
        "idempotency_key": claim["undo_key"],
        "undoes": effect.step_index,
    }
    boundary("compensation.before", detail)
    started = time.time()
    try:
        output = yield Undo(
            tool.compensate, claim["args"], effect.result, claim["undo_key"], tool.name
        )
    except Exception as exc:  # never retried here: a person decides
        error = f"{type(exc).__name__}: {exc}"[:2000]
        return (
            yield from _ask(
                ctx, effect, stage="failed", attempt=attempt, args=claim["args"], error=error
            )
        )
    done = {
        **claim,
        "state": "done",
        "output": shown(output),
        "started_at": started,
        "ended_at": time.time(),
    }
    index = yield ops.PutWithStep(
        COMPENSATION_KIND,
        effect.key,
        done,
        ctx.thread_id,
        _step(effect, done, "undone"),
        replace=True,
        run_id=_NO_RUN,
    )
    boundary("compensation.after", {**detail, "step_index": index})
    return _outcome(effect, "undone", "undone", claim.get("approval_id"), done["output"])


def undo_key(effect: Effect) -> str:
    """The undo's own idempotency key: stable for the effect, never the effect's own key."""
    text = f"compensate\0{effect.idempotency_key}\0{effect.key}".encode()
    return "tether-undo-" + hashlib.sha256(text).hexdigest()[:40]


def _base(ctx: Context, effect: Effect, args: dict[str, Any], attempt: int) -> dict[str, Any]:
    return {
        "tool": effect.tool,
        "args": args,
        "attempt": attempt,
        "undo_key": undo_key(effect),
        "undoes": effect.step_index,
        "claimed_at": time.time(),
        "owner": _owner(ctx),
        "run_id": ctx.run_id,
    }


def _step(effect: Effect, value: dict[str, Any], event: str) -> dict[str, Any]:
    """A ``compensation`` step (the step log's document shape), beside the step it undoes."""
    now = time.time()
    return {
        "kind": "compensation",
        "node": "",
        "task_id": "",
        "name": f"{effect.tool}:{event}",
        "input_hash": "",
        "model_id": None,
        "prompt_version": None,
        "tool_schema_version": None,
        "usage": {},
        "cost_usd": 0.0,
        "started_at": value.get("started_at", now),
        "ended_at": value.get("ended_at", now),
        "attempt": int(value.get("attempt", 1)),
        "worker_id": _WORKER,
        "key": effect.key,
        "graph_version": None,
        "detail": {
            "event": event,
            "undoes": effect.step_index,
            "idempotency_key": value.get("undo_key"),
            "approval_id": value.get("approval_id"),
        },
        "output": {
            k: value.get(k) for k in ("state", "args", "output", "error", "why") if k in value
        },
    }


def _outcome(
    effect: Effect,
    status: EffectStatus,
    why: str,
    approval_id: str | None = None,
    output: Any = None,
) -> EffectOutcome:
    return EffectOutcome(
        tool=effect.tool,
        key=effect.key,
        step_index=effect.step_index,
        status=status,
        why=why,
        approval_id=approval_id,
        args=effect.args,
        output=output,
    )
