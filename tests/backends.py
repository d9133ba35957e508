"""Real storage backends for tests: one isolated database or key prefix per test.

The servers come from :mod:`tether.testing.services`. The test command starts
them once and exports their URLs; a developer running ``pytest`` alone gets
servers started for the session instead. Under ``CI`` a server that cannot
start fails the run; it never skips.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether import open_checkpointer
from tether.testing.services import ENV_POSTGRES, ENV_REDIS, ENV_REDIS_BARE

BACKENDS = ("memory", "sqlite", "postgres", "redis")


@dataclass
class Backend:
    """One test's private slice of a real backend."""

    name: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)

    def open(self, **extra: Any) -> AbstractAsyncContextManager[BaseCheckpointSaver[Any]]:
        """``open_checkpointer`` on this test's database or prefix."""
        return open_checkpointer(self.url, **{**self.options, **extra})

    @property
    def key_prefix(self) -> str | None:
        return self.options.get("key_prefix")


def server_urls() -> dict[str, str]:
    """URLs exported by the test command, if it started the servers."""
    env = {"postgres": ENV_POSTGRES, "redis": ENV_REDIS, "redis_bare": ENV_REDIS_BARE}
    return {k: os.environ[v] for k, v in env.items() if os.environ.get(v)}


@contextmanager
def fresh_postgres_database(server_url: str) -> Iterator[str]:
    """Create an empty database for one test and drop it afterwards."""
    url = _create_database(server_url)
    try:
        yield url
    finally:
        _drop_database(server_url, url)


def _create_database(server_url: str) -> str:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = server_url.rpartition("/")
    return f"{base}/{name}"


# Databases a test has finished with, emptied, for the next test of this process.
_SPARE: list[str] = []
# Migration records (the checkpointer's, the run store's, the LangGraph store's): kept,
# so that a setup finds the tables they record.
_KEPT_TABLES = "%migrations"


@contextmanager
def recycled_database(server_url: str) -> Iterator[str]:
    """A database with no rows but migration records, for one test.

    Creating a database costs 100 to 300 ms here, which made it most of the time
    of LangGraph's suite on PostgreSQL (648 tests). A database a test has finished
    with is emptied instead (``TRUNCATE`` of every table but the migration records)
    and handed to this process's next test; one that cannot be emptied within 5 s
    (a connection the test left holding a lock) is dropped. The first test of a
    process gets a new database, later ones one whose migrations have run: a test
    of migrating an empty database takes :func:`fresh_postgres_database` instead.
    :func:`drop_recycled_databases` drops them at the end.
    """
    url = _SPARE.pop() if _SPARE else _create_database(server_url)
    try:
        yield url
    finally:
        _empty_or_drop(server_url, url)


def _empty_or_drop(server_url: str, url: str) -> None:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '5s'")
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public'"
                    " AND tablename NOT LIKE %s",
                    (_KEPT_TABLES,),
                )
            ]
            if tables:
                conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    except psycopg.Error:
        _drop_database(server_url, url)
    else:
        _SPARE.append(url)


def drop_recycled_databases(server_url: str) -> None:
    """Drop the databases :func:`recycled_database` kept for reuse."""
    while _SPARE:
        _drop_database(server_url, _SPARE.pop())


def _drop_database(server_url: str, url: str) -> None:
    import psycopg

    name = url.rpartition("/")[2]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_backend(
    name: str, servers: dict[str, str], tmp_path: Path, *, reuse: bool = False
) -> Iterator[Backend]:
    """A private database (postgres, sqlite), key prefix (redis) or store (memory).

    With ``reuse``, PostgreSQL's is an emptied one of an earlier test (see
    :func:`recycled_database`) when this process has one."""
    if name == "memory":
        yield Backend(name, "memory://")
    elif name == "sqlite":
        yield Backend(name, f"sqlite:///{tmp_path / 'tether.db'}")
    elif name == "postgres":
        database = recycled_database if reuse else fresh_postgres_database
        with database(servers["postgres"]) as url:
            yield Backend(name, url)
    elif name == "redis":
        prefix = f"t{uuid.uuid4().hex[:12]}"
        try:
            yield Backend(name, servers["redis"], {"key_prefix": prefix})
        finally:
            _drop_redis_prefix(servers["redis"], prefix)
    else:  # pragma: no cover - guarded by BACKENDS
        raise ValueError(name)


def _drop_redis_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        for index in client.execute_command("FT._LIST"):
            if index.decode().startswith(prefix):
                client.execute_command("FT.DROPINDEX", index)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


async def aiter_list(aiterable: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in aiterable]


def drop_postgres_connections(url: str) -> int:
    """Terminate every other connection to ``url``'s database, as a restart or failover
    does; returns how many there were."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


@contextmanager
def sqlite_write_lock(url: str) -> Iterator[None]:
    """Hold the SQLite file's one write lock, as another process's long transaction does."""
    db = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
        db.execute("ROLLBACK")
    finally:
        db.close()
