"""Crons: LangGraph's ``/runs/crons`` routes over the Runtime's cron API.

``crons.create`` (stateless: each fire runs on a thread of its own) and
``crons.create_for_thread`` make a cron whose fires create runs exactly as
``runs.create`` would; ``search``, ``count``, ``update`` and ``delete`` act on
the run store's crons, so every ``tether serve`` and scheduler on the store
sees the same. A cron is shown with LangGraph's fields (``next_run_date`` is
the next fire).

``crons.update`` changes what the Runtime can change in place: ``schedule``,
``enabled``, ``timezone`` and ``end_time`` (``null`` removes the end); the other
fields of a cron's runs (``input``, ``config``, ...) are refused with 422: delete
the cron and create it again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Response

from tether.runtime import Cron, Runtime, ids
from tether.server._errors import ApiError
from tether.server._paths import path_id
from tether.server._payloads import StorableBody
from tether.server._served import Served, served

__all__ = ["router"]

router = APIRouter(tags=["crons"])
Srv = Annotated[Served, Depends(served)]
_PAGE = 500

SortBy = Literal[
    "cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date", "end_time"
]


class CronCreate(StorableBody):
    """``POST /runs/crons`` and ``POST /threads/{id}/runs/crons``."""

    assistant_id: str
    schedule: str
    input: Any = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    checkpoint_during: bool | None = None
    interrupt_before: str | list[str] | None = None
    interrupt_after: str | list[str] | None = None
    webhook: str | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    on_run_completed: Literal["delete", "keep"] | None = None
    end_time: datetime | None = None
    enabled: bool | None = None
    timezone: str | None = None
    stream_mode: str | list[str] | None = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    durability: Literal["sync", "async", "exit"] | None = None


class CronUpdate(StorableBody):
    """``PATCH /runs/crons/{cron_id}``."""

    schedule: str | None = None
    end_time: datetime | None = None
    enabled: bool | None = None
    timezone: str | None = None
    # what the runs carry: not changeable in place (refused, named)
    input: Any = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    webhook: str | None = None
    interrupt_before: str | list[str] | None = None
    interrupt_after: str | list[str] | None = None
    on_run_completed: str | None = None
    stream_mode: str | list[str] | None = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    durability: str | None = None


class CronSearch(StorableBody):
    """``POST /runs/crons/search``."""

    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: bool | None = None
    metadata: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    sort_by: SortBy | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None


class CronCount(StorableBody):
    """``POST /runs/crons/count``."""

    assistant_id: str | None = None
    thread_id: str | None = None
    metadata: dict[str, Any] | None = None


_FIELDS = (
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "payload",
    "user_id",
    "next_run_date",
    "metadata",
    "enabled",
)


def cron_json(cron: Cron) -> dict[str, Any]:
    """A cron as LangGraph's API shows it."""
    return {
        "cron_id": cron.cron_id,
        "assistant_id": cron.assistant_id,
        "thread_id": cron.thread_id,
        "on_run_completed": cron.on_run_completed,
        "end_time": None if cron.end_time is None else cron.end_time.isoformat(),
        "schedule": cron.schedule,
        "timezone": cron.timezone,
        "created_at": cron.created_at.isoformat(),
        "updated_at": cron.updated_at.isoformat(),
        "payload": dict(cron.payload),
        "user_id": cron.user_id,
        "next_run_date": cron.next_run_at.isoformat(),
        "metadata": dict(cron.metadata),
        "enabled": cron.enabled,
    }


async def _create(srv: Served, thread_id: str | None, body: CronCreate) -> dict[str, Any]:
    await srv.check_webhook(body.webhook)
    if thread_id is not None and body.on_run_completed is not None:
        raise ApiError(
            422, "on_run_completed is for stateless crons; a thread's cron runs on that thread"
        )
    durability = body.durability
    if durability is None and body.checkpoint_during is not None:
        durability = "async" if body.checkpoint_during else "exit"
    options = {
        "config": body.config,
        "context": body.context,
        "multitask_strategy": body.multitask_strategy,
        "interrupt_before": body.interrupt_before,
        "interrupt_after": body.interrupt_after,
        "stream_mode": body.stream_mode,
        "stream_subgraphs": body.stream_subgraphs,
        "durability": durability,
        "webhook": body.webhook,
    }
    cron = await srv.runtime.create_cron(
        body.assistant_id,
        body.schedule,
        thread_id=thread_id,
        input=body.input,
        payload={k: v for k, v in options.items() if v is not None},
        metadata=body.metadata,
        timezone=body.timezone,
        end_time=body.end_time,
        on_run_completed=body.on_run_completed,
        enabled=True if body.enabled is None else body.enabled,
    )
    return cron_json(cron)


@router.post("/runs/crons")
async def create_cron(body: CronCreate, srv: Srv) -> dict[str, Any]:
    """``crons.create``: each fire is a stateless run."""
    return await _create(srv, None, body)


@router.post("/threads/{thread_id}/runs/crons")
async def create_thread_cron(thread_id: str, body: CronCreate, srv: Srv) -> dict[str, Any]:
    """``crons.create_for_thread``: each fire is a run on the thread."""
    return await _create(srv, path_id(thread_id), body)


async def _all(rt: Runtime, thread_id: str | None, enabled: bool | None) -> list[Cron]:
    found: list[Cron] = []
    while True:
        page = await rt.list_crons(
            thread_id=thread_id, enabled=enabled, limit=_PAGE, offset=len(found)
        )
        found += page
        if len(page) < _PAGE:
            return found


def _matches(cron: Cron, assistant_id: str | None, metadata: dict[str, Any] | None) -> bool:
    if assistant_id is not None and cron.assistant_id not in (
        assistant_id,
        ids.system_assistant_id(assistant_id),
    ):
        return False
    return all(cron.metadata.get(k, _MISSING) == v for k, v in (metadata or {}).items())


_MISSING = object()


async def _matching(
    srv: Served, body: CronSearch | CronCount, enabled: bool | None = None
) -> list[Cron]:
    thread_id = None if body.thread_id is None else body.thread_id
    crons = await _all(srv.runtime, thread_id, enabled)
    return [c for c in crons if _matches(c, body.assistant_id, body.metadata)]


def _sort_key(field: str) -> Any:
    def key(shown: dict[str, Any]) -> tuple[bool, str]:
        value = shown.get(field)
        return (value is None, "" if value is None else str(value))

    return key


@router.post("/runs/crons/search")
async def search_crons(body: CronSearch, srv: Srv) -> list[dict[str, Any]]:
    """``crons.search``: newest first unless ``sort_by``/``sort_order`` say otherwise."""
    if body.limit < 1 or body.offset < 0:
        raise ApiError(
            422,
            f"limit must be at least 1 and offset at least 0, got {body.limit} and {body.offset}",
        )
    unknown = sorted(set(body.select or ()) - {*_FIELDS, "now"})
    if unknown:
        raise ApiError(422, f"select names unknown cron fields: {', '.join(unknown)}")
    shown = [cron_json(c) for c in await _matching(srv, body, body.enabled)]
    field = body.sort_by or "created_at"
    shown.sort(key=_sort_key(field), reverse=(body.sort_order or "desc") == "desc")
    page = shown[body.offset : body.offset + body.limit]
    if body.select:
        keep = set(body.select)
        page = [{k: v for k, v in cron.items() if k in keep} for cron in page]
    return page


@router.post("/runs/crons/count")
async def count_crons(body: CronCount, srv: Srv) -> int:
    """``crons.count``."""
    return len(await _matching(srv, body))


_FIXED = (
    "input",
    "metadata",
    "config",
    "context",
    "webhook",
    "interrupt_before",
    "interrupt_after",
    "on_run_completed",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "durability",
)


@router.patch("/runs/crons/{cron_id}")
async def update_cron(cron_id: str, body: CronUpdate, srv: Srv) -> dict[str, Any]:
    """``crons.update``: ``schedule``, ``enabled``, ``timezone``, ``end_time``."""
    given = body.model_fields_set
    fixed = [name for name in _FIXED if name in given and getattr(body, name) is not None]
    if fixed:
        raise ApiError(
            422,
            f"crons.update cannot change {', '.join(fixed)} in tether serve yet (only schedule, "
            "enabled, timezone and end_time); delete the cron and create it again",
        )
    changes: dict[str, Any] = {}
    if "timezone" in given and body.timezone is not None:
        changes["timezone"] = body.timezone
    if "end_time" in given:
        changes["end_time"] = body.end_time
    cron = await srv.runtime.update_cron(
        path_id(cron_id), schedule=body.schedule, enabled=body.enabled, **changes
    )
    return cron_json(cron)


@router.delete("/runs/crons/{cron_id}", status_code=204)
async def delete_cron(cron_id: str, srv: Srv) -> Response:
    """``crons.delete``: the cron goes, the runs it created stay."""
    await srv.runtime.delete_cron(path_id(cron_id))
    return Response(status_code=204)
