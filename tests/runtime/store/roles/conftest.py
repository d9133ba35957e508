"""A run store on PostgreSQL twice: as its administrator, and as a worker role.

``store`` is the administrator's (graph ``g`` registered, the role granted);
``worker`` is the same database reached as the role, whose claims mint lease
secrets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.runtime.roles import role_url
from tests.runtime.store.conftest import GRAPH, add_graph
from tether.runtime.store import RunStore, open_run_store
from tether.runtime.worker_role import grant_worker_role


@pytest.fixture
async def store(admin_url: str, role: str) -> AsyncIterator[RunStore]:
    await grant_worker_role(admin_url, role)
    async with open_run_store(admin_url) as s:
        await add_graph(s, GRAPH)
        yield s


@pytest.fixture
async def worker(store: RunStore, admin_url: str, role: str) -> AsyncIterator[RunStore]:
    async with open_run_store(role_url(admin_url, role)) as s:
        yield s
