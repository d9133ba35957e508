"""Threads: create, get, update, search, count, delete, copy, prune, state and history
(design §2.2), and tether's own, for ``tether.debug``: the step log
(``GET /threads/{id}/steps``), a replay from it (``POST /threads/{id}/replay``), a fork
(``POST /threads/{id}/fork``) and a what-if (``POST /threads/{id}/what_if``)."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Header, Query, Response

from tether.server import _debug, _state, _thread_search
from tether.server._errors import ApiError
from tether.server._mapping import run_json, thread_json
from tether.server._paths import path_id
from tether.server._payloads import (
    BIGGEST_COUNT,
    ForkRequest,
    HistoryRequest,
    ReplayRequest,
    StateAtCheckpoint,
    StateUpdate,
    ThreadCreate,
    ThreadPrune,
    ThreadSearch,
    ThreadUpdate,
    WhatIfRequest,
)
from tether.server._served import Served, served

__all__ = ["router"]

router = APIRouter()
Srv = Annotated[Served, Depends(served)]
_PAGE = 1000


@router.post("/threads")
async def create_thread(body: ThreadCreate, srv: Srv) -> dict[str, Any]:
    """A new thread; with ``supersteps``, its first checkpoints too. Supersteps are applied
    only to a thread this request made (``if_exists="do_nothing"`` returns an existing
    thread as it is, so a retried request does not apply them twice); if they cannot be,
    the thread is deleted again and the answer names the problem."""
    if body.ttl is not None:
        raise ApiError(422, "ttl is not supported by tether serve yet; omit it")
    steps = [[u.model_dump() for u in s.updates] for s in body.supersteps or ()]
    if steps:
        _check_superstep_graph(srv, body.metadata)
    thread, made = await srv.runtime.store.put_thread(
        tenant=srv.runtime.tenant,
        thread_id=body.thread_id,
        metadata=body.metadata,
        if_exists=body.if_exists,
    )
    if steps and made:
        try:
            await _state.apply_supersteps(srv, thread, steps)
        except BaseException:
            await srv.runtime.store.delete_thread(thread.thread_id, tenant=srv.runtime.tenant)
            raise
        thread = await srv.runtime.get_thread(thread.thread_id)
    return thread_json(thread)


def _check_superstep_graph(srv: Served, metadata: dict[str, Any] | None) -> None:
    graph_id = (metadata or {}).get("graph_id")
    if not isinstance(graph_id, str) or not graph_id:
        raise ApiError(
            422,
            "supersteps need the thread's graph: give graph_id (metadata.graph_id) to apply them",
        )
    if graph_id not in srv.project.graph_ids:
        raise ApiError(404, f"graph {graph_id!r} is not in langgraph.json")


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, srv: Srv) -> dict[str, Any]:
    return thread_json(await srv.runtime.get_thread(path_id(thread_id)))


@router.delete("/threads/{thread_id}", status_code=204)
async def delete_thread(thread_id: str, srv: Srv) -> Response:
    await srv.delete_thread(path_id(thread_id))
    return Response(status_code=204)


async def _search(srv: Served, body: ThreadSearch, *, limit: int, offset: int) -> list[Any]:
    if limit < 1 or offset < 0:
        raise ApiError(422, f"limit must be at least 1 and offset at least 0: {limit}, {offset}")
    if body.ids is not None:
        found = []
        for thread_id in body.ids:
            try:
                found.append(await srv.runtime.get_thread(thread_id))
            except LookupError:
                continue
        if body.status is not None:
            found = [t for t in found if t.status == body.status]
        if body.metadata:
            found = [t for t in found if _thread_search.contains(t.metadata, body.metadata)]
        if body.values:
            found = [t for t in found if _thread_search.contains(t.values, body.values)]
        return found[offset : offset + limit]
    if _thread_search.needs_scan(body):
        return (await _thread_search.scan(srv.runtime, body))[offset : offset + limit]
    return await srv.runtime.store.list_threads(
        tenant=srv.runtime.tenant,
        status=body.status,
        metadata=body.metadata,
        limit=limit,
        offset=offset,
    )


@router.post("/threads/search")
async def search_threads(body: ThreadSearch, srv: Srv) -> list[dict[str, Any]]:
    found = await _search(srv, body, limit=body.limit, offset=body.offset)
    return [_thread_search.selected(thread_json(t), body.select) for t in found]


@router.post("/threads/count")
async def count_threads(body: ThreadSearch, srv: Srv) -> int:
    if _thread_search.needs_scan(body) and body.ids is None:
        return len(await _thread_search.scan(srv.runtime, body))
    total = 0
    while True:
        page = await _search(srv, body, limit=_PAGE, offset=total)
        total += len(page)
        if len(page) < _PAGE or body.ids is not None:
            return total


@router.get("/threads/{thread_id}/state")
async def get_state(thread_id: str, srv: Srv, subgraphs: bool = False) -> dict[str, Any]:
    return await srv.state(path_id(thread_id), subgraphs=subgraphs)


@router.get("/threads/{thread_id}/state/{checkpoint_id}")
async def get_state_at(
    thread_id: str, checkpoint_id: str, srv: Srv, subgraphs: bool = False
) -> dict[str, Any]:
    checkpoint = {"checkpoint_id": path_id(checkpoint_id)}
    return await srv.state(path_id(thread_id), checkpoint, subgraphs=subgraphs)


@router.post("/threads/{thread_id}/state/checkpoint")
async def post_state_at(thread_id: str, body: StateAtCheckpoint, srv: Srv) -> dict[str, Any]:
    return await srv.state(path_id(thread_id), body.checkpoint, subgraphs=body.subgraphs)


@router.post("/threads/{thread_id}/history")
async def post_history(thread_id: str, body: HistoryRequest, srv: Srv) -> list[dict[str, Any]]:
    before = {"checkpoint_id": body.before} if isinstance(body.before, str) else body.before
    return await srv.history(
        path_id(thread_id),
        limit=body.limit,
        before=before,
        metadata=body.metadata,
        checkpoint=body.checkpoint,
    )


@router.get("/threads/{thread_id}/history")
async def get_history(
    thread_id: str,
    srv: Srv,
    limit: Annotated[int, Query(ge=1, le=BIGGEST_COUNT)] = 10,
    before: str | None = None,
) -> list[dict[str, Any]]:
    if before is not None and "\x00" in before:
        raise ApiError(422, f"before={before!r} contains a NUL character, which no id holds")
    return await srv.history(
        path_id(thread_id),
        limit=limit,
        before={"checkpoint_id": before} if before else None,
        metadata=None,
        checkpoint=None,
    )


@router.get("/threads/{thread_id}/steps")
async def get_steps(thread_id: str, srv: Srv) -> dict[str, Any]:
    """The thread's step log (tether's own route, read by ``tether.debug``)."""
    return {"steps": await srv.steps(path_id(thread_id))}


@router.post("/threads/{thread_id}/replay")
async def replay(thread_id: str, body: ReplayRequest, srv: Srv) -> dict[str, Any]:
    """Replay the thread from its step log with the served graph (tether's own route)."""
    return await srv.replay(path_id(thread_id), body.upto)


@router.post("/threads/{thread_id}/fork")
async def fork(thread_id: str, body: ForkRequest, srv: Srv) -> dict[str, Any]:
    """A new thread that starts where a step of this one started (tether's own route)."""
    if (body.step is None) == (body.checkpoint_id is None):
        raise ApiError(422, "give the fork's starting point as one of step or checkpoint_id")
    at: int | str = body.step if body.step is not None else str(body.checkpoint_id)
    thread = await _debug.fork_thread(
        srv, path_id(thread_id), at, body.update, as_node=body.as_node, new_id=body.thread_id
    )
    return thread_json(thread)


@router.post("/threads/{thread_id}/what_if")
async def what_if(thread_id: str, body: WhatIfRequest, srv: Srv) -> dict[str, Any]:
    """One recorded model answer or tool result replaced, run on in a new thread (tether's
    own route): the new thread, and the run that runs it on (join it for the outcome)."""
    thread, run = await _debug.what_if_thread(
        srv, path_id(thread_id), body.step, body.output, new_id=body.thread_id
    )
    return {"thread": thread_json(thread), "run": run_json(run)}


@router.patch("/threads/{thread_id}")
async def update_thread(
    thread_id: str,
    body: ThreadUpdate,
    srv: Srv,
    prefer: Annotated[str | None, Header()] = None,
) -> Response:
    if body.ttl is not None:
        raise ApiError(422, "ttl is not supported by tether serve yet; omit it")
    thread = await srv.runtime.store.update_thread(
        path_id(thread_id), tenant=srv.runtime.tenant, metadata=body.metadata
    )
    if prefer is not None and "return=minimal" in prefer:
        return Response(status_code=204)
    return _json_response(thread_json(thread))


@router.post("/threads/{thread_id}/state")
async def update_state(thread_id: str, body: StateUpdate, srv: Srv) -> dict[str, Any]:
    checkpoint = dict(body.checkpoint or {})
    if body.checkpoint_id and "checkpoint_id" not in checkpoint:
        checkpoint["checkpoint_id"] = body.checkpoint_id
    return await _state.update_state(
        srv, path_id(thread_id), body.values, as_node=body.as_node, checkpoint=checkpoint or None
    )


@router.post("/threads/{thread_id}/copy")
async def copy_thread(thread_id: str, srv: Srv) -> dict[str, Any]:
    return thread_json(await _state.copy_thread(srv, path_id(thread_id)))


@router.post("/threads/prune")
async def prune_threads(body: ThreadPrune, srv: Srv) -> dict[str, int]:
    return {"pruned_count": await _state.prune_threads(srv, body.thread_ids, body.strategy)}


def _json_response(value: Any) -> Response:
    return Response(orjson.dumps(value), media_type="application/json")
