"""Thread search beyond what the run store filters on: by ``values``, sorted, selected.

The run store filters by status and metadata and orders by ``updated_at``
(newest first). A search by ``values`` (LangGraph's JSON containment: every key
given, recursively, with an equal value), or in another order, reads every
thread the store's filters match and finishes the job here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tether.runtime import Runtime, Thread
from tether.server._errors import ApiError
from tether.server._payloads import ThreadSearch

__all__ = ["contains", "needs_scan", "scan", "selected"]

_PAGE = 1000
_FIELDS = frozenset(
    {
        "thread_id",
        "created_at",
        "updated_at",
        "state_updated_at",
        "metadata",
        "config",
        "status",
        "values",
        "interrupts",
        "error",
    }
)


def contains(value: Any, wanted: Any) -> bool:
    """Whether ``value`` contains ``wanted`` as PostgreSQL's ``@>`` does for JSON:
    objects key by key (recursively), arrays element-wise (each wanted element in
    some element), anything else by equality."""
    if isinstance(wanted, Mapping):
        return isinstance(value, Mapping) and all(
            k in value and contains(value[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return isinstance(value, list) and all(any(contains(x, w) for x in value) for w in wanted)
    return bool(value == wanted and type(value) is type(wanted))


def needs_scan(body: ThreadSearch) -> bool:
    """Whether the search needs more than the store's own filtering and order."""
    return bool(body.values) or (body.sort_by, body.sort_order) != ("updated_at", "desc")


async def scan(runtime: Runtime, body: ThreadSearch) -> list[Thread]:
    """Every thread matching the search, in its order (not paged)."""
    found: list[Thread] = []
    offset = 0
    while True:
        page = await runtime.store.list_threads(
            tenant=runtime.tenant,
            status=body.status,
            metadata=body.metadata,
            limit=_PAGE,
            offset=offset,
        )
        found += [t for t in page if not body.values or contains(t.values, body.values)]
        if len(page) < _PAGE:
            break
        offset += _PAGE
    found.sort(key=lambda t: t.thread_id)  # ties keep thread id order
    found.sort(key=lambda t: getattr(t, body.sort_by), reverse=body.sort_order == "desc")
    return found


def selected(shown: dict[str, Any], select: list[str] | None) -> dict[str, Any]:
    """Only the ``select`` fields of a thread (all of them without ``select``)."""
    if not select:
        return shown
    unknown = sorted(set(select) - _FIELDS)
    if unknown:
        raise ApiError(
            422,
            f"select has unknown thread field(s) {', '.join(unknown)}; "
            f"use some of {', '.join(sorted(_FIELDS))}",
        )
    return {k: v for k, v in shown.items() if k in select}
