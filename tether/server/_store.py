"""The store API: ``/store/items`` (put, get, delete), ``…/search`` and ``/store/namespaces``.

Backed by LangGraph's :class:`~langgraph.store.base.BaseStore` in the run
store's database: ``AsyncPostgresStore`` on a PostgreSQL run store,
``AsyncSqliteStore`` on an SQLite one (its ``store`` tables beside tether's), so
every ``tether serve`` on the same run store sees the same items. The store is
opened (and its tables created) on the first store request, and closed with
the app. No vector index is configured: a search by ``query``, an ``index``
list or a ``ttl`` is refused with 422.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from langgraph.store.base import BaseStore, Item
from pydantic import BaseModel, ConfigDict, Field

from tether.checkpointing import parse_url
from tether.server._errors import ApiError

__all__ = ["StoreHolder", "router"]

router = APIRouter(tags=["store"])


class StoreHolder:
    """The app's store, opened on first use (one per app)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._stack = contextlib.AsyncExitStack()
        self._store: BaseStore | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> BaseStore:
        """The store, opened and set up the first time."""
        async with self._lock:
            if self._store is None:
                parsed = parse_url(self._url)
                store: Any
                if parsed.backend == "postgres":
                    from langgraph.store.postgres.aio import AsyncPostgresStore

                    store = await self._stack.enter_async_context(
                        AsyncPostgresStore.from_conn_string(self._url)
                    )
                else:
                    from langgraph.store.sqlite.aio import AsyncSqliteStore

                    store = await self._stack.enter_async_context(
                        AsyncSqliteStore.from_conn_string(parsed.sqlite_path)
                    )
                await store.setup()
                self._store = store
            return self._store

    async def aclose(self) -> None:
        """Close the store's connections, if it was opened."""
        self._store = None
        await self._stack.aclose()


async def _store(request: Request) -> BaseStore:
    holder: StoreHolder = request.app.state.tether_store
    return await holder.get()


Store = Annotated[BaseStore, Depends(_store)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PutItem(_Body):
    namespace: list[str]
    key: str = Field(min_length=1)
    value: dict[str, Any]
    index: bool | list[str] | None = None
    ttl: float | None = None


class DeleteItem(_Body):
    namespace: list[str]
    key: str = Field(min_length=1)


class SearchItems(_Body):
    namespace_prefix: list[str] = Field(default_factory=list)
    filter: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    query: str | None = None
    refresh_ttl: bool | None = None


class ListNamespaces(_Body):
    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


def _namespace(labels: list[str], what: str = "namespace") -> tuple[str, ...]:
    for label in labels:
        if not label:
            raise ApiError(422, f"{what} labels cannot be empty: {labels!r}")
        if "." in label:
            raise ApiError(422, f"{what} label {label!r} contains '.', which labels cannot")
    return tuple(labels)


def _item(item: Item) -> dict[str, Any]:
    shown = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    score = getattr(item, "score", None)
    if score is not None:
        shown["score"] = score
    return shown


@router.put("/store/items", status_code=204)
async def put_item(body: PutItem, store: Store) -> Response:
    """``store.put_item``."""
    namespace = _namespace(body.namespace)
    if not namespace:
        raise ApiError(422, "an item needs a namespace of at least one label")
    if body.ttl is not None:
        raise ApiError(422, "ttl is not supported by tether serve's store yet; omit it")
    if isinstance(body.index, list):
        raise ApiError(422, "index fields need a vector index, which tether serve's store lacks")
    await store.aput(namespace, body.key, body.value, index=False if body.index is False else None)
    return Response(status_code=204)


@router.get("/store/items")
async def get_item(
    store: Store,
    key: Annotated[str, Query(min_length=1)],
    namespace: Annotated[str, Query(description="The labels joined by '.'")] = "",
) -> dict[str, Any]:
    """``store.get_item``."""
    labels = _namespace(namespace.split(".") if namespace else [])
    item = await store.aget(labels, key)
    if item is None:
        raise ApiError(404, f"no item {key!r} in namespace {list(labels)!r}")
    return _item(item)


@router.delete("/store/items", status_code=204)
async def delete_item(body: DeleteItem, store: Store) -> Response:
    """``store.delete_item``."""
    await store.adelete(_namespace(body.namespace), body.key)
    return Response(status_code=204)


@router.post("/store/items/search")
async def search_items(body: SearchItems, store: Store) -> dict[str, Any]:
    """``store.search_items``: by namespace prefix and ``filter`` (equality on the value's
    fields)."""
    if body.query:
        raise ApiError(
            422,
            "a search by query needs a vector index, which tether serve's "
            "store lacks; search by filter",
        )
    items = await store.asearch(
        _namespace(body.namespace_prefix, "namespace_prefix"),
        filter=body.filter,
        limit=body.limit,
        offset=body.offset,
    )
    return {"items": [_item(item) for item in items]}


@router.post("/store/namespaces")
async def list_namespaces(body: ListNamespaces, store: Store) -> dict[str, Any]:
    """``store.list_namespaces``."""
    found = await store.alist_namespaces(
        prefix=None if body.prefix is None else _namespace(body.prefix, "prefix"),
        suffix=None if body.suffix is None else _namespace(body.suffix, "suffix"),
        max_depth=body.max_depth,
        limit=body.limit,
        offset=body.offset,
    )
    return {"namespaces": [list(ns) for ns in found]}
