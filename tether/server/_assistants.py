"""Assistants: the project's graphs as LangGraph's system assistants, and created ones.

Every graph in ``langgraph.json`` has the assistant LangGraph's server gives it
(``uuid5`` of the graph id, design §2.11); anywhere an assistant id is taken, a
graph id works too.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from tether.runtime import models
from tether.server._errors import ApiError
from tether.server._mapping import assistant_json
from tether.server._paths import path_id
from tether.server._payloads import AssistantCreate, AssistantSearch
from tether.server._served import Served, served

__all__ = ["router"]

router = APIRouter()
Srv = Annotated[Served, Depends(served)]


@router.post("/assistants")
async def create_assistant(body: AssistantCreate, srv: Srv) -> dict[str, Any]:
    if body.graph_id not in srv.project.graph_ids:
        known = ", ".join(srv.project.graph_ids)
        raise ApiError(
            404, f"graph {body.graph_id!r} is not in langgraph.json; its graphs are: {known}"
        )
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
    if assistant.assistant_id not in srv.created_assistants:
        srv.created_assistants.append(assistant.assistant_id)
    return assistant_json(assistant)


@router.get("/assistants/{assistant_id}")
async def get_assistant(assistant_id: str, srv: Srv) -> dict[str, Any]:
    found = await srv.runtime.store.get_assistant(path_id(assistant_id), tenant=srv.runtime.tenant)
    return assistant_json(found)


def _matches(assistant: models.Assistant, body: AssistantSearch) -> bool:
    if body.graph_id is not None and assistant.graph_id != body.graph_id:
        return False
    if body.name is not None and body.name.lower() not in assistant.name.lower():
        return False
    meta = assistant.metadata
    return all(meta.get(k) == v for k, v in (body.metadata or {}).items())


async def _search(srv: Served, body: AssistantSearch) -> list[models.Assistant]:
    return [a for a in await srv.assistants() if _matches(a, body)]


@router.post("/assistants/search")
async def search_assistants(body: AssistantSearch, srv: Srv) -> list[dict[str, Any]]:
    if body.limit < 1 or body.offset < 0:
        raise ApiError(422, "limit must be at least 1 and offset at least 0")
    found = await _search(srv, body)
    return [assistant_json(a) for a in found[body.offset : body.offset + body.limit]]


@router.post("/assistants/count")
async def count_assistants(body: AssistantSearch, srv: Srv) -> int:
    return len(await _search(srv, body))
