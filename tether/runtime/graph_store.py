"""The store a project's graphs get: LangGraph's ``BaseStore``, one tenant's items.

LangGraph's server gives every graph a store (a node's ``store`` parameter,
``get_store()``): memory that outlives a thread. tether's workers do the same,
with the store the server's ``/store`` API serves: ``AsyncPostgresStore`` on a
PostgreSQL run store, ``AsyncSqliteStore`` on an SQLite one (its ``store``
tables beside tether's). It is opened, and its tables created, on the first
operation a graph makes, so a project that never uses it costs nothing and a
worker role without rights on it fails only the run that reaches for it.

A run sees only its tenant's items. :class:`TenantStore` puts every namespace
under the tenant's root label (:func:`tether.runtime.ids.tenant_store_root`) and
takes it off what it answers, exactly as the ``/store`` API does: a graph of
tenant A and an SDK client of tenant A see the same items, and neither sees
tenant B's. Erasing a tenant deletes its items by that root.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any, cast

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchOp,
)

from tether.checkpointing import parse_url
from tether.runtime import ids

__all__ = ["SharedStore", "TenantStore"]


class SharedStore:
    """LangGraph's store in the run store ``url``'s database, opened on first use.

    One per process; :meth:`aclose` closes its connections.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._stack = contextlib.AsyncExitStack()
        self._store: BaseStore | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> BaseStore:
        """The store, opened and set up the first time."""
        if self._store is not None:  # every graph store call comes here: no lock once open
            return self._store
        async with self._lock:
            if self._store is None:
                parsed = parse_url(self.url)
                store: Any
                if parsed.backend == "postgres":
                    from langgraph.store.postgres.aio import AsyncPostgresStore

                    store = await self._stack.enter_async_context(
                        AsyncPostgresStore.from_conn_string(self.url)
                    )
                else:
                    from langgraph.store.sqlite.aio import AsyncSqliteStore

                    store = await self._stack.enter_async_context(
                        AsyncSqliteStore.from_conn_string(parsed.sqlite_path)
                    )
                await store.setup()
                await self.opened(store, parsed.backend)
                self._store = store
            return self._store

    async def opened(self, store: BaseStore, backend: str) -> None:
        """Called once, when the store has just been opened and set up."""

    async def aclose(self) -> None:
        """Close the store's connections, if it was opened."""
        self._store = None
        await self._stack.aclose()


class TenantStore(BaseStore):
    """``shared``'s items of ``tenant`` only, as a graph's ``BaseStore``.

    Sync calls (a sync node's ``store.put``) run on ``loop``, the worker's
    event loop, from the node's thread; made on that loop itself they would
    block it, and are refused with the async method to use instead.
    """

    def __init__(self, shared: SharedStore, tenant: str, loop: asyncio.AbstractEventLoop) -> None:
        self._shared = shared
        self._root = ids.tenant_store_root(tenant)
        self._loop = loop

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        store = await self._shared.get()
        results = await store.abatch([self._inside(op) for op in ops])
        return [self._outside(op, result) for op, result in zip(ops, results, strict=True)]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError(
                "a graph called the store's sync API on the worker's event loop, which would "
                "block it: in an async node use the async methods (aput, aget, asearch, "
                "adelete, alist_namespaces)"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()

    def _inside(self, op: Op) -> Op:
        """``op`` with its namespaces under the tenant's root."""
        root = self._root
        if isinstance(op, GetOp | PutOp):
            return op._replace(namespace=(root, *op.namespace))
        if isinstance(op, SearchOp):
            return op._replace(namespace_prefix=(root, *op.namespace_prefix))
        if isinstance(op, ListNamespacesOp):
            given = list(op.match_conditions or ())
            conditions = [
                MatchCondition("prefix", (root, *c.path)) if c.match_type == "prefix" else c
                for c in given
            ]
            if not any(c.match_type == "prefix" for c in given):
                conditions.insert(0, MatchCondition("prefix", (root,)))
            depth = None if op.max_depth is None else op.max_depth + 1
            return op._replace(match_conditions=tuple(conditions), max_depth=depth)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    def _outside(self, op: Op, result: Result) -> Result:
        """``result`` as the graph sees it: namespaces without the tenant's root."""
        if isinstance(op, ListNamespacesOp):
            return [tuple(namespace[1:]) for namespace in cast(list[tuple[str, ...]], result)]
        if isinstance(result, list):
            for item in cast(list[Item], result):
                _drop_root(item)
        elif isinstance(result, Item):
            _drop_root(result)
        return result


def _drop_root(item: Item) -> None:
    item.namespace = tuple(item.namespace[1:])
