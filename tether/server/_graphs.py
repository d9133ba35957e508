"""An assistant's graph: its drawable structure and JSON schemas (LangGraph Studio reads both).

The graph is the project's, compiled as a run would compile it (no checkpointer
is needed to describe it). A schema LangGraph cannot generate is ``null``, as
the SDK's ``GraphSchema`` documents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import create_model

from tether.server._paths import path_id
from tether.server._served import Served, served

__all__ = ["router"]

router = APIRouter()
Srv = Annotated[Served, Depends(served)]


def _schema(make: Callable[[], Any]) -> Any:
    try:
        return make()
    except Exception:  # LangGraph cannot describe every type; the SDK documents None
        return None


def _update_type(channel: Any) -> Any:
    try:
        kind = channel.UpdateType
    except Exception:  # a channel without a declared type
        return Any
    return Any if kind is None else kind


def _state_schema(graph: Any) -> dict[str, Any]:
    """The server's ``_state_jsonschema``: one field per stream channel, typed by its updates."""
    fields: dict[str, Any] = {}
    for key in graph.stream_channels_list:
        fields[key] = (_update_type(graph.channels[key]), None)
    model: Any = create_model(graph.get_name("State"), **fields)
    schema: dict[str, Any] = model.model_json_schema()
    return schema


@router.get("/assistants/{assistant_id}/graph")
async def get_graph(assistant_id: str, srv: Srv, xray: int | bool = False) -> Any:
    assistant = await srv.runtime.store.get_assistant(
        path_id(assistant_id), tenant=srv.runtime.tenant
    )
    async with srv.project.graph(assistant.graph_id) as graph:
        drawable = await graph.aget_graph(xray=xray)
        return drawable.to_json()


def _schemas(graph_id: str, graph: Any) -> dict[str, Any]:
    return {
        "graph_id": graph_id,
        "input_schema": _schema(graph.get_input_jsonschema),
        "output_schema": _schema(graph.get_output_jsonschema),
        "state_schema": _schema(lambda: _state_schema(graph)),
        "config_schema": _schema(graph.get_config_jsonschema),
        "context_schema": _schema(graph.get_context_jsonschema),
    }


@router.get("/assistants/{assistant_id}/schemas")
async def get_schemas(assistant_id: str, srv: Srv) -> dict[str, Any]:
    assistant = await srv.runtime.store.get_assistant(
        path_id(assistant_id), tenant=srv.runtime.tenant
    )
    async with srv.project.graph(assistant.graph_id) as graph:
        return _schemas(assistant.graph_id, graph)


async def _subgraphs(
    srv: Served, assistant_id: str, namespace: str | None, recurse: bool
) -> dict[str, Any]:
    assistant = await srv.runtime.store.get_assistant(assistant_id, tenant=srv.runtime.tenant)
    async with srv.project.graph(assistant.graph_id) as graph:
        return {
            ns: _schemas(assistant.graph_id, subgraph)
            async for ns, subgraph in graph.aget_subgraphs(namespace=namespace, recurse=recurse)
        }


@router.get("/assistants/{assistant_id}/subgraphs")
async def get_subgraphs(assistant_id: str, srv: Srv, recurse: bool = False) -> dict[str, Any]:
    """Each subgraph's schemas by namespace (``a|b`` for nested ones, with ``recurse``)."""
    return await _subgraphs(srv, path_id(assistant_id), None, recurse)


@router.get("/assistants/{assistant_id}/subgraphs/{namespace}")
async def get_subgraphs_in(
    assistant_id: str, namespace: str, srv: Srv, recurse: bool = False
) -> dict[str, Any]:
    """The subgraphs under ``namespace``."""
    return await _subgraphs(srv, path_id(assistant_id), path_id(namespace), recurse)
