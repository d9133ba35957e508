"""The run store's schema versions and the runner that applies them (design §3.2.1).

Each :class:`Migration` has the statements of both dialects. ``setup()`` applies
the pending ones in order, one transaction each, and records each in
``tether_runtime_migrations``. Concurrent runners serialise on a lock taken
first in every transaction (PostgreSQL: a transaction-scoped advisory lock;
SQLite: ``BEGIN IMMEDIATE``), then re-read the recorded version, so a second
runner finds the work done. A database recorded at a version this code does not
know raises :class:`RuntimeSchemaError` and is left untouched.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, NamedTuple

from tether._pg_setup import lock_for_setup
from tether.runtime.errors import RuntimeSchemaError
from tether.runtime.store import (
    schema_postgres,
    schema_retention,
    schema_rollbacks,
    schema_sqlite,
)

__all__ = [
    "LATEST",
    "MIGRATIONS",
    "Migration",
    "apply_postgres",
    "apply_sqlite",
    "check_version",
    "postgres_version",
    "sqlite_version",
]


class Migration(NamedTuple):
    """One schema version: its number, what it does, and each dialect's statements."""

    version: int
    description: str
    postgres: tuple[str, ...]
    sqlite: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "assistants, threads, runs, run events, crons, workers, fence check",
        schema_postgres.V1,
        schema_sqlite.V1,
    ),
    Migration(
        2,
        "retention: thread activity index, audit summaries, erasure receipts, prune marks",
        schema_retention.POSTGRES_V2,
        schema_retention.SQLITE_V2,
    ),
    Migration(
        3,
        "an index of the runs cancelled with rollback, for the orphaned-rollback sweep",
        schema_rollbacks.POSTGRES_V3,
        schema_rollbacks.SQLITE_V3,
    ),
)
LATEST = MIGRATIONS[-1].version

_PG_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('tether.runtime.migrate', 0))"
_PG_TABLE = """CREATE TABLE IF NOT EXISTS tether_runtime_migrations (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL
)"""
_SQLITE_TABLE = """CREATE TABLE IF NOT EXISTS tether_runtime_migrations (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  REAL NOT NULL
)"""
_CURRENT = "SELECT COALESCE(MAX(version), 0) AS version FROM tether_runtime_migrations"


def check_version(found: int) -> None:
    """Raise :class:`RuntimeSchemaError` when the database is newer than this code."""
    if found > LATEST:
        raise RuntimeSchemaError(
            f"the run store's database schema is v{found}, newer than this tether "
            f"(knows v{LATEST}); upgrade tether"
        )


def _next(current: int) -> Migration | None:
    check_version(current)
    return next((m for m in MIGRATIONS if m.version > current), None)


async def apply_postgres(conn: Any) -> int:
    """Apply pending migrations on a psycopg ``AsyncConnection`` (autocommit); the version.

    A database already at :data:`LATEST` is only read, so a role without DDL
    rights (a worker role, ``tether workers grant``) can open it.
    """
    current = await postgres_version(conn)
    check_version(current)
    if current == LATEST:
        return current
    while True:
        async with conn.transaction():
            await lock_for_setup(conn.execute, _PG_LOCK)
            await conn.execute(_PG_TABLE)
            cur = await conn.execute(_CURRENT)
            row = await cur.fetchone()
            current = int(row["version"] if isinstance(row, dict) else row[0])
            migration = _next(current)
            if migration is None:
                return current
            for statement in migration.postgres:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO tether_runtime_migrations (version, description, applied_at) "
                "VALUES (%s, %s, now())",
                (migration.version, migration.description),
            )


async def postgres_version(conn: Any) -> int:
    """The recorded version (0 when nothing was applied)."""
    cur = await conn.execute("SELECT to_regclass('tether_runtime_migrations') IS NOT NULL AS e")
    row = await cur.fetchone()
    if not (row["e"] if isinstance(row, dict) else row[0]):
        return 0
    cur = await conn.execute(_CURRENT)
    row = await cur.fetchone()
    return int(row["version"] if isinstance(row, dict) else row[0])


def apply_sqlite(db: sqlite3.Connection) -> int:
    """Apply pending migrations on a ``sqlite3`` connection (``isolation_level=None``).

    A database already at :data:`LATEST` is only read: a process starting beside
    busy writers does not queue for the file's one write lock to find nothing to do.
    """
    current = sqlite_version(db)
    check_version(current)
    if current == LATEST:
        return current
    while True:
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(_SQLITE_TABLE)
            current = int(db.execute(_CURRENT).fetchone()[0])
            migration = _next(current)
            if migration is not None:
                for statement in migration.sqlite:
                    db.execute(statement)
                db.execute(
                    "INSERT INTO tether_runtime_migrations (version, description, applied_at) "
                    "VALUES (?, ?, ?)",
                    (migration.version, migration.description, time.time()),
                )
        except BaseException:
            db.rollback()
            raise
        db.commit()
        if migration is None:
            return current


def sqlite_version(db: sqlite3.Connection) -> int:
    """The recorded version (0 when nothing was applied)."""
    exists = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tether_runtime_migrations'"
    ).fetchone()
    return 0 if exists is None else int(db.execute(_CURRENT).fetchone()[0])
