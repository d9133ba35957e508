"""The approvals of one tenant, each with the run that waits on it and where it stands.

Approval requests are stored beside the checkpoints, not per tenant; a request
belongs to the tenant whose run store holds its thread. A request of a thread
the tenant cannot see is not listed, and getting it answers 404, as for a run
of another tenant.

Where a request stands (:attr:`Entry.state`):

* ``pending``: undecided, not expired, and an ``interrupted`` run waits on it,
  or (a compensation request, action ``compensate:<tool>``) the compensation
  of its ended run waits on it: a person can decide it (the queue);
* ``starting``: undecided and its thread has a run still executing (the run
  stores the request, then stops at it);
* ``orphaned``: undecided and no run waits on it any more (the run was
  cancelled or deleted without it, or its thread's runs are gone): deciding it
  resumes nothing, so it is refused;
* ``overdue``: undecided past its expiry, waiting for the expiry sweep
  (``tether approvals expire``);
* ``expired`` (settled by its expiry policy), or decided: ``approved``,
  ``edited``, ``rejected``, ``cancelled``, ``voided``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tether.approvals import ApprovalView, UnknownApprovalError, get_approval, list_approvals
from tether.compensation import compensation_waits_on, is_compensation_request
from tether.runtime import NotFoundError, Run, Runtime
from tether.server._identity import User
from tether.server.inbox._filters import Filters

__all__ = ["DECIDED", "Entry", "entries", "entry", "tenant_runtime"]

DECIDED = frozenset({"approved", "edited", "rejected", "cancelled", "voided"})
_PAGE = 500


@dataclass(frozen=True)
class Entry:
    """One approval request as the inbox shows it.

    Attributes:
        view: The stored request with its decision.
        state: Where it stands (see the module docstring).
        run: The ``interrupted`` run waiting on it, if any.
        may_decide: Whether the current user is one of its approvers.
    """

    view: ApprovalView
    state: str
    run: Run | None
    may_decide: bool

    @property
    def approval_id(self) -> str:
        return self.view.request.approval_id

    def age_seconds(self, now: datetime) -> float:
        """Seconds since the request was made."""
        return (now - datetime.fromisoformat(self.view.request.requested_at)).total_seconds()

    def expires_in_seconds(self, now: datetime) -> float:
        """Seconds until it expires (negative once it has)."""
        return (datetime.fromisoformat(self.view.request.expires_at) - now).total_seconds()

    def to_json(self, now: datetime) -> dict[str, Any]:
        """The request document with the inbox's view of it (the API's answer)."""
        run = self.run
        return {
            **self.view.request.to_dict(),
            "state": self.state,
            "decision": self.view.decision,
            "may_decide": self.may_decide,
            "age_seconds": round(self.age_seconds(now), 3),
            "expires_in_seconds": round(self.expires_in_seconds(now), 3),
            "run": None
            if run is None
            else {
                "run_id": run.run_id,
                "thread_id": run.thread_id,
                "assistant_id": run.assistant_id,
                "graph_id": run.graph_id,
                "status": run.status,
            },
        }


def tenant_runtime(runtime: Runtime, user: User) -> Runtime:
    """``runtime`` acting for the user's tenant."""
    return runtime if user.tenant == runtime.tenant else runtime.scoped(user.tenant)


async def _waiting_runs(rt: Runtime) -> dict[str, Run]:
    """Approval id -> the ``interrupted`` run of the tenant that waits on it."""
    found: dict[str, Run] = {}
    offset = 0
    while True:
        page = await rt.list(status="interrupted", limit=_PAGE, offset=offset)
        for run in page:
            for waiting in run.waiting_on:
                if waiting.approval_id:
                    found[waiting.approval_id] = run
        if len(page) < _PAGE:
            return found
        offset += _PAGE


async def _in_tenant(rt: Runtime, thread_id: str) -> bool:
    try:
        await rt.get_thread(thread_id)
    except NotFoundError:
        return False
    return True


async def _state(rt: Runtime, view: ApprovalView, run: Run | None, now: datetime) -> str:
    if view.status != "pending":
        return view.status
    if view.overdue(now):
        return "overdue"
    if run is not None:
        return "pending"
    if is_compensation_request(view.request):  # its run has ended; its compensation waits
        waits = await compensation_waits_on(await rt.checkpointer(), view.request)
        return "pending" if waits else "orphaned"
    newest = await rt.list(thread_id=view.request.thread_id, limit=1)
    if newest and newest[0].status in ("pending", "running"):
        return "starting"
    return "orphaned"


def _shown(entry: Entry, filters: Filters, now: datetime) -> bool:
    request = entry.view.request
    wanted = {
        "pending": entry.state == "pending",
        "orphaned": entry.state == "orphaned",
        "expired": entry.state in ("expired", "overdue"),
        "decided": entry.state in DECIDED,
        "all": True,
    }[filters.show]
    if not wanted:
        return False
    if filters.approver is not None and filters.approver not in request.approvers.users:
        return False
    if filters.role is not None and filters.role not in request.approvers.roles:
        return False
    if filters.mine and not entry.may_decide:
        return False
    if filters.expiring_before is not None and not (
        datetime.fromisoformat(request.expires_at) < filters.expiring_before
    ):
        return False
    return filters.older_than is None or (
        entry.age_seconds(now) >= filters.older_than.total_seconds()
    )


def _order(filters: Filters) -> Any:
    def by_expiry(e: Entry) -> tuple[str, str, str]:
        r = e.view.request
        return (r.expires_at, r.requested_at, r.approval_id)

    def by_age(e: Entry) -> tuple[str, str, str]:
        r = e.view.request
        return (r.requested_at, r.expires_at, r.approval_id)

    return by_age if filters.sort == "age" else by_expiry


def _entry(view: ApprovalView, state: str, run: Run | None, user: User) -> Entry:
    allowed = view.request.approvers.allows(user.identity, user.roles)
    return Entry(view, state, run, allowed)


async def entries(
    runtime: Runtime, user: User, filters: Filters, now: datetime | None = None
) -> list[Entry]:
    """The user's tenant's approvals that ``filters`` select, in the order they ask for."""
    moment = now or datetime.now(UTC)
    rt = tenant_runtime(runtime, user)
    views = await list_approvals(await rt.checkpointer(), status=None)
    waiting = await _waiting_runs(rt)
    visible: dict[str, bool] = {}
    found = []
    for view in views:
        thread_id = view.request.thread_id
        if thread_id not in visible:
            visible[thread_id] = await _in_tenant(rt, thread_id)
        if not visible[thread_id]:
            continue
        run = waiting.get(view.request.approval_id)
        item = _entry(view, await _state(rt, view, run, moment), run, user)
        if _shown(item, filters, moment):
            found.append(item)
    return sorted(found, key=_order(filters))


async def entry(
    runtime: Runtime, user: User, approval_id: str, now: datetime | None = None
) -> Entry:
    """One approval of the user's tenant.

    Raises:
        UnknownApprovalError: No such request, or its thread is another tenant's.
    """
    moment = now or datetime.now(UTC)
    rt = tenant_runtime(runtime, user)
    unknown = UnknownApprovalError(f"no approval request {approval_id!r}")
    try:
        view = await get_approval(await rt.checkpointer(), approval_id)
    except UnknownApprovalError:
        raise unknown from None  # the same answer as for another tenant's request
    if not await _in_tenant(rt, view.request.thread_id):
        raise unknown
    run = None
    if view.status == "pending":
        for candidate in await rt.list(thread_id=view.request.thread_id, status="interrupted"):
            if any(w.approval_id == approval_id for w in candidate.waiting_on):
                run = candidate
    return _entry(view, await _state(rt, view, run, moment), run, user)
