"""Erasure requests: delete everything tether stored for a thread, a tenant or a user.

:func:`erase` finds the subject's threads in the run store (a ``user`` is the
``owner`` or ``user_id`` in a thread's metadata, the owner LangGraph custom
auth stamps), and for each one deletes its checkpoints, pending writes,
records and step log, then its run store row (runs, events and crons
cascade; a worker still running one of its runs loses its fence and commits
nothing more), then its checkpoints once more (anything a worker wrote in
between) and its audit summaries. A request killed half way is safe to repeat:
the row goes last, so the same request finds the thread again.

Erasing a tenant also deletes what it keeps outside its threads: its
thread-less crons and its assistants (not the graphs' system assistants, which
every tenant shares).

``within=TENANT`` confines an erasure to one tenant (the HTTP API's, whose
caller acts for a tenant): a thread of another tenant is not touched, a user's
threads are those of the tenant only, and naming another tenant is refused.

It returns an :class:`ErasureReceipt` (what went, counts, when, a hash) and
keeps it in the audit store. The receipt names nothing in clear: the subject
and each erased thread appear as SHA-256 hashes of their ids, so ``tether audit
show THREAD`` can find the receipts of a thread its caller can name.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals import canonical_json, list_approvals
from tether.retention.errors import ErasureError, RetentionPolicyError
from tether.retention.plane import retention_plane
from tether.retention.policy import check_age
from tether.retention.summary import sha256_text, with_digest
from tether.runtime.store import RetentionPlane, RunStore, SubjectKind, ThreadActivity
from tether.store import store_for

if TYPE_CHECKING:
    from tether.runtime import Runtime, SyncRuntime

__all__ = ["COUNTED", "ErasureReceipt", "erase", "erase_store", "erase_sync", "subject_of"]

COUNTED = (
    "threads",
    "runs",
    "run_events",
    "crons",
    "assistants",
    "store_items",
    "api_keys",
    "checkpoints",
    "steps",
    "approvals",
    "tool_records",
    "audit_summaries",
)
"""What a receipt counts, in this order."""
_PAGE = 200


@dataclass(frozen=True)
class ErasureReceipt:
    """Proof of one erasure.

    Attributes:
        receipt_id: Its id.
        subject_kind: ``thread``, ``tenant`` or ``user``.
        subject_sha256: SHA-256 of the subject's id.
        tenant_sha256: SHA-256 of the tenant whose data went: the one named, the
            ``within`` tenant, or the one tenant every erased thread was of;
            ``None`` when the erasure spanned tenants or found no thread.
        threads: SHA-256 of each erased thread's id.
        counts: How many of each thing went (see :data:`COUNTED`).
        requested_at: When the erasure started (ISO 8601, UTC).
        completed_at: When it ended.
        receipt_sha256: SHA-256 of the canonical JSON of the other fields.
    """

    receipt_id: str
    subject_kind: str
    subject_sha256: str
    tenant_sha256: str | None
    threads: tuple[str, ...]
    counts: dict[str, int]
    requested_at: str
    completed_at: str
    receipt_sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "receipt_id": self.receipt_id,
            "subject_kind": self.subject_kind,
            "subject_sha256": self.subject_sha256,
            "tenant_sha256": self.tenant_sha256,
            "threads": list(self.threads),
            "counts": dict(self.counts),
            "requested_at": self.requested_at,
            "completed_at": self.completed_at,
            "receipt_sha256": self.receipt_sha256,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ErasureReceipt:
        return cls(
            receipt_id=data["receipt_id"],
            subject_kind=data["subject_kind"],
            subject_sha256=data["subject_sha256"],
            tenant_sha256=data.get("tenant_sha256"),
            threads=tuple(data["threads"]),
            counts=dict(data["counts"]),
            requested_at=data["requested_at"],
            completed_at=data["completed_at"],
            receipt_sha256=data["receipt_sha256"],
        )


def subject_of(
    thread: str | None = None, tenant: str | None = None, user: str | None = None
) -> tuple[SubjectKind, str]:
    """The one subject an erasure names.

    Raises:
        ErasureError: none, more than one, or an empty id.
    """
    given: list[tuple[SubjectKind, str | None]] = [
        ("thread", thread),
        ("tenant", tenant),
        ("user", user),
    ]
    named = [(k, v) for k, v in given if v is not None]
    if len(named) != 1:
        raise ErasureError(
            "an erasure names exactly one subject: thread=, tenant= or user= "
            f"(--thread, --tenant or --user); got {len(named)}"
        )
    kind, value = named[0]
    if not isinstance(value, str) or not value:
        raise ErasureError(f"{kind}: expected a non-empty id, got {value!r}")
    return kind, value


async def _count_checkpoints(saver: BaseCheckpointSaver[Any], thread_id: str) -> int:
    config: Any = {"configurable": {"thread_id": thread_id}}
    return sum([1 async for _ in saver.alist(config)])


async def _erase_thread(
    plane: RetentionPlane,
    store: RunStore,
    saver: BaseCheckpointSaver[Any],
    thread: ThreadActivity,
    counts: dict[str, int],
) -> None:
    records = store_for(saver)
    tid = thread.thread_id
    found = {
        **await plane.count_thread_rows(tid),
        "checkpoints": await _count_checkpoints(saver, tid),
        "steps": len(await records.steps(tid)),
        "approvals": len(await list_approvals(saver, thread_id=tid, status=None)),
        "tool_records": len(await records.list("tool", thread_id=tid)),
    }
    await saver.adelete_thread(tid)
    deleted = await plane.delete_quiet_thread(tid, before=None, summary_id=None)
    if not deleted:  # a run of it is live: the row goes anyway, its worker loses its fence
        await store.delete_thread(tid, tenant=thread.tenant_id)
    await saver.adelete_thread(tid)
    found["audit_summaries"] = await plane.delete_audit_summaries(tid)
    found["threads"] = 1
    for name, value in found.items():
        counts[name] = counts.get(name, 0) + value


def _check_keep_for(keep_for: object, started: datetime) -> None:
    """``keep_for`` is ``None`` or an age a policy takes (see :data:`MAX_DURATION`) whose end
    is a date; else :class:`ErasureError`, raised before anything is erased."""
    if keep_for is None:
        return
    try:
        check_age(keep_for, "keep_for")
        started + cast(timedelta, keep_for)
    except RetentionPolicyError as exc:
        raise ErasureError(str(exc)) from None
    except OverflowError:
        raise ErasureError(
            f"keep_for {keep_for!r} from {started.isoformat()} ends past the last date"
        ) from None


async def erase_store(
    store: RunStore,
    saver: BaseCheckpointSaver[Any],
    *,
    thread: str | None = None,
    tenant: str | None = None,
    user: str | None = None,
    now: datetime | None = None,
    keep_for: timedelta | None = None,
    within: str | None = None,
) -> ErasureReceipt:
    """:func:`erase` on an open run store and its workers' checkpointer."""
    kind, value = subject_of(thread, tenant, user)
    started = now or datetime.now(UTC)
    _check_keep_for(keep_for, started)  # before anything is deleted: the receipt must be written
    if within is not None and kind == "tenant" and value != within:
        raise ErasureError(
            f"an erasure confined to tenant {within!r} cannot erase tenant {value!r}"
        )
    plane = retention_plane(store)
    counts = dict.fromkeys(COUNTED, 0)
    hashes: list[str] = []
    tenants: set[str] = set()
    if kind == "thread" and await plane.thread_activity(value) is None:
        # No row (already deleted, or never in the run store): its checkpoints may remain.
        await saver.adelete_thread(value)
        counts["audit_summaries"] = await plane.delete_audit_summaries(value, tenant=within)
        hashes.append(sha256_text(value))
    after = ""
    while page := await plane.subject_threads(kind, value, after=after, limit=_PAGE):
        after = page[-1].thread_id
        for found in page:
            if within is not None and found.tenant_id != within:
                continue
            await _erase_thread(plane, store, saver, found, counts)
            hashes.append(sha256_text(found.thread_id))
            tenants.add(found.tenant_id)
    if kind == "tenant":
        for name, deleted in (await plane.delete_tenant_rows(value)).items():
            counts[name] += deleted
    scope = value if kind == "tenant" else within
    if scope is None and len(tenants) == 1:
        scope = next(iter(tenants))
    completed = datetime.now(UTC) if now is None else started
    doc = with_digest(
        {
            "receipt_id": uuid.uuid4().hex,
            "subject_kind": kind,
            "subject_sha256": sha256_text(value),
            "tenant_sha256": None if scope is None else sha256_text(scope),
            "threads": hashes,
            "counts": counts,
            "requested_at": started.isoformat(),
            "completed_at": completed.isoformat(),
        },
        "receipt_sha256",
    )
    await plane.put_receipt(
        doc["receipt_id"],
        receipt=canonical_json(doc),
        thread_hashes=hashes,
        written_at=completed,
        keep_until=None if keep_for is None else completed + keep_for,
    )
    return ErasureReceipt.from_dict(doc)


async def erase(
    runtime: Runtime,
    *,
    thread: str | None = None,
    tenant: str | None = None,
    user: str | None = None,
    now: datetime | None = None,
    keep_for: timedelta | None = None,
    within: str | None = None,
) -> ErasureReceipt:
    """Delete everything tether stored for one subject; the receipt (also stored).

    Args:
        runtime: An open :class:`~tether.runtime.Runtime` (any tenant).
        thread: Erase this thread (of any tenant).
        tenant: Erase every thread of this tenant.
        user: Erase every thread whose metadata ``owner`` or ``user_id`` is this.
        now: The receipt's time (default: now).
        keep_for: How long the receipt is kept (default: forever).
        within: Confine the erasure to this tenant (see the module docstring).

    Raises:
        ErasureError: not exactly one subject, or ``tenant`` other than ``within``.
    """
    subject_of(thread, tenant, user)  # refuse before opening the checkpointer
    saver = await runtime.checkpointer()
    return await erase_store(
        runtime.store,
        saver,
        thread=thread,
        tenant=tenant,
        user=user,
        now=now,
        keep_for=keep_for,
        within=within,
    )


def erase_sync(
    runtime: SyncRuntime,
    *,
    thread: str | None = None,
    tenant: str | None = None,
    user: str | None = None,
    now: datetime | None = None,
    keep_for: timedelta | None = None,
    within: str | None = None,
) -> ErasureReceipt:
    """Sync twin of :func:`erase`, on an open :class:`~tether.runtime.SyncRuntime`."""
    coro = erase(
        runtime.runtime,
        thread=thread,
        tenant=tenant,
        user=user,
        now=now,
        keep_for=keep_for,
        within=within,
    )
    receipt: ErasureReceipt = runtime._call(coro)  # the runtime's own loop thread runs it
    return receipt
