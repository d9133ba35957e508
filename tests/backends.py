"""Real storage backends for tests: one isolated database or key prefix per test.

The servers come from :mod:`tether.testing.services`. The test command starts
them once and exports their URLs; a developer running ``pytest`` alone gets
servers started for the session instead. Under ``CI`` a server that cannot
start fails the run; it never skips.
"""

from __future__ import annotations

import os
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
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = server_url.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_backend(name: str, servers: dict[str, str], tmp_path: Path) -> Iterator[Backend]:
    """A private database (postgres, sqlite), key prefix (redis) or store (memory)."""
    if name == "memory":
        yield Backend(name, "memory://")
    elif name == "sqlite":
        yield Backend(name, f"sqlite:///{tmp_path / 'tether.db'}")
    elif name == "postgres":
        with fresh_postgres_database(servers["postgres"]) as url:
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
