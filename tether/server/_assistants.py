"""Assistants: the project's graphs as LangGraph's system assistants, created ones, and
their versions (an update makes a new version; ``set_latest`` goes back to one).

Every graph in ``langgraph.json`` has the assistant LangGraph's server gives it
(``uuid5`` of the graph id, design §2.11); anywhere an assistant id is taken, a
graph id works too.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from tether.server._errors import ApiError
from tether.server._mapping import assistant_json, assistant_version_json
from tether.server._paths import path_id
from tether.server._payloads import (
    AssistantCreate,
    AssistantLatest,
    AssistantSearch,
    AssistantUpdate,
    AssistantVersions,
)
from tether.server._served import Served, served

__all__ = ["router"]

router = APIRouter()
Srv = Annotated[Served, Depends(served)]
_PAGE = 1000


def _check_graph(srv: Served, graph_id: str) -> None:
    if graph_id not in srv.project.graph_ids:
        known = ", ".join(srv.project.graph_ids)
        raise ApiError(404, f"graph {graph_id!r} is not in langgraph.json; its graphs are: {known}")


@router.post("/assistants")
async def create_assistant(body: AssistantCreate, srv: Srv) -> dict[str, Any]:
    _check_graph(srv, body.graph_id)
    assistant = await srv.runtime.store.put_assistant(
        body.graph_id,
        tenant=srv.runtime.tenant,
        assistant_id=body.assistant_id,
        name=body.name,
        description=body.description,
        config=body.config,
        context=body.context,
        metadata=body.metadata,
        if_exists=body.if_exists,
    )
    return assistant_json(assistant)


@router.get("/assistants/{assistant_id}")
async def get_assistant(assistant_id: str, srv: Srv) -> dict[str, Any]:
    found = await srv.runtime.store.get_assistant(path_id(assistant_id), tenant=srv.runtime.tenant)
    return assistant_json(found)


async def _search(srv: Served, body: AssistantSearch, *, limit: int, offset: int) -> list[Any]:
    if limit < 1 or offset < 0:
        raise ApiError(422, "limit must be at least 1 and offset at least 0")
    return await srv.runtime.store.list_assistants(
        tenant=srv.runtime.tenant,
        graph_id=body.graph_id,
        name=body.name,
        metadata=body.metadata,
        limit=limit,
        offset=offset,
    )


async def _sorted(srv: Served, body: AssistantSearch) -> list[Any]:
    """Every match in ``sort_by`` order (ties by assistant id), for a sorted page."""
    found: list[Any] = []
    while True:
        page = await _search(srv, body, limit=_PAGE, offset=len(found))
        found += page
        if len(page) < _PAGE:
            break
    found.sort(key=lambda a: a.assistant_id)
    descending = (body.sort_order or "desc") == "desc"  # LangGraph's default order
    found.sort(key=lambda a: getattr(a, body.sort_by or "created_at"), reverse=descending)
    return found[body.offset : body.offset + body.limit]


@router.post("/assistants/search")
async def search_assistants(body: AssistantSearch, srv: Srv) -> list[dict[str, Any]]:
    """Oldest first, unless ``sort_by``/``sort_order`` say otherwise (``sort_order``
    defaults to ``desc``, ``sort_by`` to ``created_at``); ``select`` keeps only the
    fields named."""
    if body.sort_by is None and body.sort_order is None:
        found = await _search(srv, body, limit=body.limit, offset=body.offset)
    else:
        if body.limit < 1 or body.offset < 0:
            raise ApiError(422, "limit must be at least 1 and offset at least 0")
        found = await _sorted(srv, body)
    shown = [assistant_json(a) for a in found]
    if body.select:
        shown = [{k: v for k, v in a.items() if k in body.select} for a in shown]
    return shown


@router.post("/assistants/count")
async def count_assistants(body: AssistantSearch, srv: Srv) -> int:
    total = 0
    while True:
        page = await _search(srv, body, limit=_PAGE, offset=total)
        total += len(page)
        if len(page) < _PAGE:
            return total


@router.patch("/assistants/{assistant_id}")
async def update_assistant(assistant_id: str, body: AssistantUpdate, srv: Srv) -> dict[str, Any]:
    if body.graph_id is not None:
        _check_graph(srv, body.graph_id)
    updated = await srv.runtime.store.update_assistant(
        path_id(assistant_id),
        tenant=srv.runtime.tenant,
        graph_id=body.graph_id,
        config=body.config,
        context=body.context,
        metadata=body.metadata,
        name=body.name,
        description=body.description,
    )
    return assistant_json(updated)


@router.delete("/assistants/{assistant_id}", status_code=204)
async def delete_assistant(assistant_id: str, srv: Srv, delete_threads: bool = False) -> Response:
    gone = await srv.runtime.store.delete_assistant(
        path_id(assistant_id), tenant=srv.runtime.tenant
    )
    if delete_threads:
        while True:
            threads = await srv.runtime.store.list_threads(
                tenant=srv.runtime.tenant, metadata={"assistant_id": gone.assistant_id}, limit=100
            )
            for thread in threads:
                await srv.delete_thread(thread.thread_id)
            if len(threads) < 100:
                break
    return Response(status_code=204)


@router.post("/assistants/{assistant_id}/versions")
async def list_versions(
    assistant_id: str, body: AssistantVersions, srv: Srv
) -> list[dict[str, Any]]:
    versions = await srv.runtime.store.assistant_versions(
        path_id(assistant_id),
        tenant=srv.runtime.tenant,
        metadata=body.metadata,
        limit=body.limit,
        offset=body.offset,
    )
    return [assistant_version_json(v) for v in versions]


@router.post("/assistants/{assistant_id}/latest")
async def set_latest(assistant_id: str, body: AssistantLatest, srv: Srv) -> dict[str, Any]:
    found = await srv.runtime.store.set_assistant_version(
        path_id(assistant_id), body.version, tenant=srv.runtime.tenant
    )
    return assistant_json(found)
