"""A fresh run store on each real backend: a new SQLite file or PostgreSQL database per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.backends import fresh_backend
from tether.runtime.ids import system_assistant_id
from tether.runtime.store import RunStore, open_run_store

GRAPH = "g"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database on each backend."""
    name: str = request.param
    urls = request.getfixturevalue("servers") if name == "postgres" else {}
    with fresh_backend(name, urls, tmp_path) as backend:
        yield backend.url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[RunStore]:
    """A set-up store with the system assistant of graph ``g``."""
    async with open_run_store(store_url) as s:
        await s.setup()
        await add_graph(s, GRAPH)
        yield s


@pytest.fixture
async def stores(store: RunStore, store_url: str) -> AsyncIterator[list[RunStore]]:
    """Eight more stores on the same database: separate connections, as separate workers."""
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(open_run_store(store_url)) for _ in range(8)]


async def add_graph(store: RunStore, graph_id: str) -> None:
    """Register ``graph_id``'s system assistant, as a worker does at start."""
    await store.put_assistant(
        graph_id,
        assistant_id=system_assistant_id(graph_id),
        metadata={"created_by": "system"},
        if_exists="do_nothing",
    )
