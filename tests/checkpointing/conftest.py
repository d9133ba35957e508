"""Fixtures of the Redis-only checkpointing tests: fresh key prefixes and a raw client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.backends import fresh_backend

Prefixes = Callable[[], str]


@pytest.fixture
def redis_url(servers: dict[str, str]) -> str:
    return servers["redis"]


@pytest.fixture
def new_prefix(servers: dict[str, str], tmp_path: Path) -> Iterator[Prefixes]:
    """Hands out fresh key prefixes; every key they start is dropped from Redis afterwards."""
    with ExitStack() as stack:

        def make() -> str:
            backend = stack.enter_context(fresh_backend("redis", servers, tmp_path))
            prefix: str = backend.options["key_prefix"]
            return prefix

        yield make


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[Redis]:
    """A plain client on the test Redis, answering ``str``."""
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()
