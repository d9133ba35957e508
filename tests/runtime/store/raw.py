"""Reading a run store's database behind the store's back, to check what it wrote."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Every row ``sql`` (no parameters) returns, on SQLite or PostgreSQL."""
    if url.startswith("sqlite"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return [tuple(r) for r in db.execute(sql).fetchall()]
        finally:
            db.close()
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def execute(url: str, sql: str) -> None:
    """Run one statement (no parameters) and commit."""
    if url.startswith("sqlite"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            with db:
                db.execute(sql)
        finally:
            db.close()
    else:
        with psycopg.connect(url) as conn:
            conn.execute(sql)


def every_row(url: str) -> str:
    """Every row of every table in the database, as one text, sorted so that two dumps compare."""
    if url.startswith("sqlite"):
        tables = "SELECT name FROM sqlite_master WHERE type = 'table'"
        select = 'SELECT * FROM "{}"'
    else:
        tables = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        select = 'SELECT t::text FROM "{}" t'
    names = sorted(t for (t,) in rows(url, tables))
    return repr([(t, sorted(map(repr, rows(url, select.format(t))))) for t in names])


def copy_value(url: str, table: str, column: str, *, key: str, source: str, target: str) -> None:
    """Copy ``column`` of the row whose ``key`` is ``source`` onto the row of ``target``,
    as someone with write access to the database would move a sealed value."""
    execute(
        url,
        f"UPDATE {table} SET {column} = (SELECT {column} FROM {table} "
        f"WHERE {key} = '{source}') WHERE {key} = '{target}'",
    )
