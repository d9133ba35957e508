"""The store API: ``/store/items`` (put, get, delete), ``…/search`` and ``/store/namespaces``.

Backed by LangGraph's :class:`~langgraph.store.base.BaseStore` in the run
store's database: ``AsyncPostgresStore`` on a PostgreSQL run store,
``AsyncSqliteStore`` on an SQLite one (its ``store`` tables beside tether's), so
every ``tether serve`` on the same run store sees the same items. The store is
opened (and its tables created) on the first store request, and closed with
the app. No vector index is configured: a search by ``query``, an ``index``
list or a ``ttl`` is refused with 422.

Each tenant has its own items. Every namespace a caller names is stored under
its tenant's root label (:func:`tether.runtime.ids.tenant_store_root`), which
no caller can name (labels cannot hold control characters), and answers show
namespaces without it. Items written before tenants had roots are adopted by
the default tenant ``""`` when the store is first opened.

With an ``auth.path`` project, each call first goes through the project's
``@auth.on.store`` handler for its action (``put``, ``get``, ``search``,
``list_namespaces``, ``delete``), as LangGraph's server does: it gets the
call's ``value`` (``namespace``, ``key``, …) and may change its ``namespace``
(for example put the user's identity in front); ``False`` refuses (403); a
filter it returns is not applied (items have no metadata), as in LangGraph.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from langgraph.store.base import BaseStore, Item
from pydantic import Field

from tether.runtime import graph_store, ids
from tether.server._caller import Caller, caller
from tether.server._custom_auth import CustomAuth
from tether.server._errors import ApiError
from tether.server._payloads import BIGGEST_COUNT, StorableBody

__all__ = ["StoreHolder", "router"]

router = APIRouter(tags=["store"])


class StoreHolder(graph_store.SharedStore):
    """The app's store, opened on first use (one per app); adopts rootless items on opening."""

    async def opened(self, store: BaseStore, backend: str) -> None:
        await _adopt_rootless_items(store, backend)


async def _adopt_rootless_items(store: Any, backend: str) -> None:
    """Put items stored without a tenant root (by an earlier tether) under the default
    tenant's. Idempotent; two servers doing it at once move each row once."""
    sql = "UPDATE store SET prefix = {p} || '.' || prefix WHERE prefix NOT LIKE {p2}"
    args = (ids.tenant_store_root(""), ids.TENANT_STORE_PREFIX + "%")
    if backend == "postgres":
        async with store._cursor() as cur:
            await cur.execute(sql.format(p="%s", p2="%s"), args)
    else:
        await store.conn.execute(sql.format(p="?", p2="?"), args)


@dataclass(frozen=True)
class _Scoped:
    """The store as one caller reaches it: under its tenant's root, through its handlers."""

    store: BaseStore
    caller: Caller
    auth: CustomAuth | None

    @property
    def root(self) -> str:
        return ids.tenant_store_root(self.caller.tenant)

    async def allow(self, action: str, value: dict[str, Any]) -> dict[str, Any]:
        """``value`` after the project's ``@auth.on.store`` handler for ``action``.

        A filter the handler returns (a global ``@auth.on`` handler's ``owner``,
        say) is not applied, as LangGraph's server does not: items have no
        metadata. Scope a store by changing ``value["namespace"]``.
        """
        if self.auth is not None:
            await self.auth.authorize(self.caller, "store", action, value)
        return value

    def inside(self, labels: Sequence[str], what: str = "namespace") -> tuple[str, ...]:
        """``labels`` (checked) under the caller's tenant root."""
        return (self.root, *_namespace(list(labels), what))

    def outside(self, namespace: Sequence[str]) -> list[str]:
        """A stored namespace as the caller sees it (without its tenant root)."""
        return list(namespace[1:])


async def _store(request: Request) -> _Scoped:
    holder: StoreHolder = request.app.state.tether_store
    authenticator = request.app.state.tether_gate.authenticator
    auth = authenticator if isinstance(authenticator, CustomAuth) else None
    return _Scoped(await holder.get(), caller(request), auth)


Store = Annotated[_Scoped, Depends(_store)]


class _Body(StorableBody):
    """Refused like the other routes' bodies: unstorable numbers, text and nesting (422)."""


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
    offset: int = Field(default=0, ge=0, le=BIGGEST_COUNT)
    query: str | None = None
    refresh_ttl: bool | None = None


class ListNamespaces(_Body):
    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = Field(default=None, ge=1, le=BIGGEST_COUNT)
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=BIGGEST_COUNT)


_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
# The field names LangGraph's SQLite store can filter on; refused alike on PostgreSQL.
_FIELD = re.compile(r"[A-Za-z0-9_.-]+")
_SCALARS = (str, int, float, bool, type(None))


def _text(value: str, where: str) -> None:
    if any(ord(c) < 32 for c in value):
        raise ApiError(422, f"{where} holds a control character (NUL, tab, newline, …)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(422, f"{where} is not valid Unicode text (a lone surrogate)") from None


def _scalar(value: Any, where: str) -> None:
    if isinstance(value, list):
        for i, item in enumerate(value):
            _scalar(item, f"{where}[{i}]")
        return
    if not isinstance(value, _SCALARS):
        raise ApiError(422, f"{where} must be a string, number, boolean, null or a list of them")
    if isinstance(value, str):
        _text(value, where)


def _no_nul(value: Any, where: str) -> None:
    """PostgreSQL's jsonb cannot hold NUL: refused on every backend alike."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ApiError(422, f"{where} contains a NUL character, which the store cannot hold")
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_nul(k, f"{where} (a key)")
            _no_nul(v, f"{where}[{k!r}]")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _no_nul(v, f"{where}[{i}]")


def _key(key: str) -> str:
    _text(key, "key")
    return key


def _namespace(labels: list[str], what: str = "namespace") -> tuple[str, ...]:
    for label in labels:
        if not label:
            raise ApiError(422, f"{what} labels cannot be empty: {labels!r}")
        if "." in label:
            raise ApiError(422, f"{what} label {label!r} contains '.', which labels cannot")
        _text(label, f"{what} label {label!r}")
    return tuple(labels)


def _item(item: Item, scoped: _Scoped) -> dict[str, Any]:
    shown = {
        "namespace": scoped.outside(item.namespace),
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
async def put_item(body: PutItem, scoped: Store) -> Response:
    """``store.put_item``."""
    namespace = _namespace(body.namespace)
    if body.ttl is not None:
        raise ApiError(422, "ttl is not supported by tether serve's store yet; omit it")
    if isinstance(body.index, list):
        raise ApiError(422, "index fields need a vector index, which tether serve's store lacks")
    value = await scoped.allow(
        "put", {"namespace": namespace, "key": _key(body.key), "value": body.value,
                "index": body.index},
    )  # fmt: skip
    if not value["namespace"]:
        raise ApiError(422, "an item needs a namespace of at least one label")
    _no_nul(value["value"], "value")
    await scoped.store.aput(
        scoped.inside(value["namespace"]),
        _key(value["key"]),
        value["value"],
        index=False if value.get("index") is False else None,
    )
    return Response(status_code=204)


@router.get("/store/items")
async def get_item(
    scoped: Store,
    key: Annotated[str, Query(min_length=1)],
    namespace: Annotated[str, Query(description="The labels joined by '.'")] = "",
) -> dict[str, Any] | None:
    """``store.get_item``: the item, or ``null`` when there is none (or it is not the caller's)."""
    labels = _namespace(namespace.split(".") if namespace else [])
    value = await scoped.allow("get", {"namespace": labels, "key": _key(key)})
    item = await scoped.store.aget(scoped.inside(value["namespace"]), _key(value["key"]))
    if item is None:
        return None  # as LangGraph's server answers: 200 and null, which the SDK returns
    return _item(item, scoped)


@router.delete("/store/items", status_code=204)
async def delete_item(body: DeleteItem, scoped: Store) -> Response:
    """``store.delete_item``."""
    value = await scoped.allow(
        "delete", {"namespace": _namespace(body.namespace), "key": _key(body.key)}
    )
    await scoped.store.adelete(scoped.inside(value["namespace"]), _key(value["key"]))
    return Response(status_code=204)


def _filter(given: dict[str, Any] | None) -> dict[str, Any] | None:
    """``filter`` if every key is a field name and every value a value or ``{"$op": value}``
    (the comparisons LangGraph's stores apply); else 422 naming the part."""
    if given is None:
        return None
    for key, value in given.items():
        where = f"filter[{key!r}]"
        if not key or len(key) > 255:
            raise ApiError(422, f"{where}: a field name must have 1 to 255 characters")
        _text(key, f"{where} (the field name)")
        if not _FIELD.fullmatch(key):
            raise ApiError(
                422,
                f"{where}: a field name holds only letters, digits, '_', '.' and '-'",
            )
        if isinstance(value, dict):
            unknown = sorted(set(value) - _OPERATORS)
            if unknown or not value:
                raise ApiError(
                    422,
                    f"{where}: a comparison is one of {', '.join(sorted(_OPERATORS))}, "
                    f"got {unknown[:3] or 'nothing'}",
                )
            for op, operand in value.items():
                _scalar(operand, f"{where}[{op!r}]")
        else:
            _scalar(value, where)
    return given


@router.post("/store/items/search")
async def search_items(body: SearchItems, scoped: Store) -> dict[str, Any]:
    """``store.search_items``: by namespace prefix and ``filter`` (equality on the value's
    fields)."""
    if body.query:
        raise ApiError(
            422,
            "a search by query needs a vector index, which tether serve's "
            "store lacks; search by filter",
        )
    value = await scoped.allow(
        "search",
        {
            "namespace": _namespace(body.namespace_prefix, "namespace_prefix"),
            "filter": _filter(body.filter),
            "limit": body.limit,
            "offset": body.offset,
            "query": None,
        },
    )
    items = await scoped.store.asearch(
        scoped.inside(value["namespace"], "namespace_prefix"),
        filter=_filter(value["filter"]),
        limit=body.limit,
        offset=body.offset,
    )
    return {"items": [_item(item, scoped) for item in items]}


@router.post("/store/namespaces")
async def list_namespaces(body: ListNamespaces, scoped: Store) -> dict[str, Any]:
    """``store.list_namespaces``."""
    value = await scoped.allow(
        "list_namespaces",
        {
            "namespace": None if body.prefix is None else _namespace(body.prefix, "prefix"),
            "suffix": None if body.suffix is None else _namespace(body.suffix, "suffix"),
            "max_depth": body.max_depth,
            "limit": body.limit,
            "offset": body.offset,
        },
    )
    prefix = value["namespace"]
    suffix = value["suffix"]
    found = await scoped.store.alist_namespaces(
        prefix=scoped.inside(prefix or (), "prefix"),
        suffix=None if suffix is None else _namespace(list(suffix), "suffix"),
        max_depth=None if body.max_depth is None else body.max_depth + 1,
        limit=body.limit,
        offset=body.offset,
    )
    return {"namespaces": [scoped.outside(ns) for ns in found]}
