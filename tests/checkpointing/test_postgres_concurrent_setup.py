"""Processes opening the same new PostgreSQL database together all get a set-up saver.

Two workers starting at once both ran upstream's migrations, and the second
failed on the migrations table's primary key (or in a deadlock between two
``CREATE INDEX CONCURRENTLY``), so one worker died at start. The opener
serialises set-ups; a saver set up directly retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from tests.backends import Backend, fresh_backend
from tether import open_checkpointer
from tether.checkpointing._postgres import PostgresSaver


@pytest.fixture
def postgres_backend(servers: dict[str, str], tmp_path: Path) -> Iterator[Backend]:
    with fresh_backend("postgres", servers, tmp_path) as backend:
        yield backend


@pytest.mark.parametrize("round_", range(3))
async def test_savers_opened_together_on_a_new_database_all_set_up(
    postgres_backend: Backend, round_: int
) -> None:
    async with AsyncExitStack() as stack:
        openers = [
            stack.enter_async_context(open_checkpointer(postgres_backend.url, encryption=False))
            for _ in range(8)
        ]
        savers = await asyncio.gather(*openers)
        for saver in savers:
            assert await saver.aget_tuple({"configurable": {"thread_id": "t"}}) is None


async def test_savers_set_up_together_without_the_opener_all_succeed(
    postgres_backend: Backend,
) -> None:
    async with AsyncExitStack() as stack:
        pools = [
            await stack.enter_async_context(
                AsyncConnectionPool(
                    postgres_backend.url,
                    min_size=1,
                    max_size=1,
                    open=False,
                    kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                )
            )
            for _ in range(8)
        ]
        savers = [PostgresSaver(pool) for pool in pools]
        await asyncio.gather(*(saver.setup() for saver in savers))
        for saver in savers:
            assert await saver.aget_tuple({"configurable": {"thread_id": "t"}}) is None
