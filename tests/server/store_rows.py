"""The server's store table read and written behind its back (LangGraph's own stores)."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg


async def put_item(url: str, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
    """Write an item with LangGraph's store for the run store at ``url`` (tables made)."""
    if url.startswith("sqlite"):
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        async with AsyncSqliteStore.from_conn_string(url.removeprefix("sqlite:///")) as store:
            await store.setup()
            await store.aput(namespace, key, value)
        return
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(url) as pg:
        await pg.setup()
        await pg.aput(namespace, key, value)


def prefixes(url: str) -> list[str]:
    """The store table's namespaces as stored (labels joined by '.')."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return [p for (p,) in db.execute("SELECT prefix FROM store ORDER BY prefix")]
    with psycopg.connect(url) as conn:
        return [p for (p,) in conn.execute("SELECT prefix FROM store ORDER BY prefix")]
