"""Reading the audit store: a thread's summaries and erasure receipts, after its state is gone."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tether.retention.plane import retention_plane
from tether.retention.summary import sha256_text
from tether.runtime.store import RunStore

__all__ = ["AuditTrail", "audit_trail"]


@dataclass(frozen=True)
class AuditTrail:
    """What the audit store keeps about one thread id.

    Attributes:
        thread_id: The id asked about.
        summaries: Its audit summaries, oldest first, each with its ``state``
            (``done``; ``deleting`` or ``pending`` while a sweep is under way).
        receipts: The receipts of erasures that deleted a thread with this id.
    """

    thread_id: str
    summaries: list[dict[str, Any]] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.summaries or self.receipts)

    def to_dict(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "summaries": self.summaries, "receipts": self.receipts}


async def audit_trail(store: RunStore, thread_id: str, *, tenant: str | None = None) -> AuditTrail:
    """The summaries and erasure receipts of ``thread_id`` (any tenant).

    ``tenant`` keeps only that tenant's: the summaries of its threads, and the
    receipts of erasures of its data (their ``tenant_sha256``).
    """
    plane = retention_plane(store)
    summaries = [
        {"state": state, **json.loads(text)}
        for state, text in await plane.audit_summaries(thread_id)
    ]
    receipts = [json.loads(text) for text in await plane.receipts_for(sha256_text(thread_id))]
    if tenant is not None:
        summaries = [s for s in summaries if s.get("tenant_id") == tenant]
        receipts = [r for r in receipts if r.get("tenant_sha256") == sha256_text(tenant)]
    return AuditTrail(thread_id, summaries, receipts)
