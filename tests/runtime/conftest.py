"""Fixtures of the runtime's tests: a fresh run store per test, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from tests.backends import fresh_postgres_database
from tests.runtime.workers import PROJECT, Workers
from tether.runtime.api import Runtime
from tether.runtime.project import Project


@pytest.fixture(params=["sqlite", "postgres"])
def runtime_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A private run store (its checkpoints live in the same database)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runtime.db'}"
        return
    servers = request.getfixturevalue("servers")
    with fresh_postgres_database(servers["postgres"]) as url:
        yield url


@pytest.fixture
async def runtime(runtime_url: str) -> AsyncIterator[Runtime]:
    async with Runtime(runtime_url, graphs=Project.load(PROJECT).graph_ids) as rt:
        yield rt


@pytest.fixture
def workers(runtime_url: str, tmp_path: Path) -> Iterator[Workers]:
    """``tether worker`` processes on the test's run store, killed by PID afterwards."""
    workdir = tmp_path / "world"
    workdir.mkdir()
    pool = Workers(runtime_url, workdir)
    try:
        yield pool
    finally:
        pool.stop_all()


# Run-scoped worker roles: roles belong to the whole server, so each test makes
# its own and drops it after its database (the role's grants go with it).
@pytest.fixture
def role(servers: dict[str, str]) -> Iterator[str]:
    """A new role name, dropped after the test's database."""
    name = f"w_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(servers["postgres"], autocommit=True) as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{name}"')


@pytest.fixture
def admin_url(servers: dict[str, str], role: str) -> Iterator[str]:
    """A fresh database, as its administrator (dropped before ``role``)."""
    with fresh_postgres_database(servers["postgres"]) as url:
        yield url
