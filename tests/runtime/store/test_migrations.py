"""``setup()``: creates every version, is idempotent and concurrency-safe, refuses newer ones."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.store.raw import execute, rows
from tether.errors import BackendUnavailableError, ConfigurationError
from tether.runtime.errors import RuntimeSchemaError
from tether.runtime.migrations import LATEST, MIGRATIONS
from tether.runtime.store import open_run_store
from tether.testing.services import free_port

TABLES = {
    "tether_assistants",
    "tether_assistant_versions",
    "tether_threads",
    "tether_runs",
    "tether_run_events",
    "tether_crons",
    "tether_cron_fires",
    "tether_workers",
    "tether_runtime_migrations",
    "tether_audit_summaries",
    "tether_erasure_receipts",
    "tether_erasure_receipt_threads",
    "tether_retention_marks",
}
RECORDED = [(m.version, m.description) for m in MIGRATIONS]


def _tables(url: str) -> set[str]:
    sql = (
        "SELECT name FROM sqlite_master WHERE type = 'table'"
        if url.startswith("sqlite")
        else "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
    )
    return {r[0] for r in rows(url, sql) if r[0].startswith("tether_")}


def _migration_rows(url: str) -> list[tuple[Any, ...]]:
    return rows(url, "SELECT version, description FROM tether_runtime_migrations ORDER BY 1")


def _record_version(url: str, version: int) -> None:
    applied = "0" if url.startswith("sqlite") else "now()"
    execute(
        url,
        f"INSERT INTO tether_runtime_migrations VALUES ({version}, 'from the future', {applied})",
    )


async def test_setup_creates_every_version_and_records_it(store_url: str) -> None:
    async with open_run_store(store_url) as store:
        assert await store.schema_version() == 0
        await store.setup()
        assert await store.schema_version() == LATEST == 3
    assert _tables(store_url) == TABLES
    assert _migration_rows(store_url) == RECORDED


async def test_a_second_setup_is_a_no_op(store_url: str) -> None:
    async with open_run_store(store_url) as store:
        await store.setup()
        await store.setup()
        assert await store.schema_version() == LATEST
    async with open_run_store(store_url) as again:
        await again.setup()
    assert _migration_rows(store_url) == RECORDED


async def test_two_concurrent_setups_both_succeed(store_url: str) -> None:
    # Two stores are two connections, as two processes would be; the lock
    # (advisory / BEGIN IMMEDIATE) serialises them and the second finds the work done.
    async with open_run_store(store_url) as one, open_run_store(store_url) as two:
        await asyncio.gather(one.setup(), two.setup())
        assert await one.schema_version() == await two.schema_version() == LATEST
    assert _migration_rows(store_url) == RECORDED
    assert _tables(store_url) == TABLES


async def test_a_database_newer_than_the_code_is_refused(store_url: str) -> None:
    async with open_run_store(store_url) as store:
        await store.setup()
    _record_version(store_url, LATEST + 2)
    async with open_run_store(store_url) as store:
        with pytest.raises(RuntimeSchemaError) as caught:
            await store.setup()
    assert str(caught.value) == (
        f"the run store's database schema is v{LATEST + 2}, newer than this tether "
        f"(knows v{LATEST}); upgrade tether"
    )
    assert [v for v, _ in _migration_rows(store_url)] == [1, 2, 3, LATEST + 2]


@pytest.mark.parametrize(
    "url", ["redis://localhost:6379", "memory://", "mysql://host/db", "tether.db"]
)
async def test_other_urls_name_both_supported_schemes(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        async with open_run_store(url):
            pass
    assert "postgresql://" in str(caught.value)
    assert "sqlite:///" in str(caught.value)
    assert repr(url) in str(caught.value)


async def test_using_a_store_before_setup_says_to_run_setup(store_url: str) -> None:
    async with open_run_store(store_url) as store:
        for call in (
            store.get_run("r"),
            store.list_threads(),
            store.claim("w", graphs=["g"], limit=1, lease=1.0),
            store.verify("r", 1),
        ):
            with pytest.raises(RuntimeSchemaError, match=r"call setup\(\) on the store"):
                await call
        assert await store.schema_version() == 0


async def test_an_unreachable_postgres_is_named() -> None:
    url = f"postgresql://nobody:secret@127.0.0.1:{free_port()}/db"
    with pytest.raises(BackendUnavailableError) as caught:
        async with open_run_store(url, connect_timeout=2):
            pass
    assert "cannot reach the run store's PostgreSQL (postgresql://nobody:***@" in str(caught.value)
    assert "secret" not in str(caught.value)


async def test_a_sqlite_file_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/missing/run.db"
    with pytest.raises(ConfigurationError, match="does not exist; create it first"):
        async with open_run_store(url):
            pass
