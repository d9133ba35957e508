"""Who leads the scheduler: one process at a time per run store (§3.12).

- **PostgreSQL:** ``pg_try_advisory_lock`` on a dedicated session connection,
  held for as long as the process leads. The lock belongs to the session, so
  it is gone as soon as the connection is (a crash, ``kill -9``, a network
  cut); :meth:`PostgresLeadership.check` runs ``SELECT 1`` on it every tick
  and gives leadership up when that fails.
- **SQLite:** ``flock(LOCK_EX | LOCK_NB)`` on ``<db>.scheduler.lock`` next to
  the database; the OS releases it when the process ends, even on ``kill -9``.

Every job the leader runs is idempotent, so the instant two processes might
both believe they lead (a connection lost but not yet noticed) does no harm.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Any, Protocol

from tether.checkpointing import parse_url

__all__ = ["LOCK_KEY", "Leadership", "PostgresLeadership", "SqliteLeadership", "leadership_for"]

LOCK_KEY = "tether.scheduler"


class Leadership(Protocol):
    """A lock that at most one process holds at a time."""

    async def acquire(self) -> bool:
        """Try once, without waiting; whether this process leads now."""

    async def check(self) -> bool:
        """Whether this process still leads (``False`` once the lock is lost)."""

    async def release(self) -> None:
        """Give leadership up (a no-op when not leading)."""


class PostgresLeadership:
    """An advisory lock on a session connection of its own."""

    def __init__(self, url: str) -> None:
        self.url = url.replace("postgres://", "postgresql://", 1)
        self._conn: Any = None
        self._leading = False

    async def acquire(self) -> bool:
        import psycopg

        if self._leading:
            return await self.check()
        try:
            if self._conn is None or self._conn.closed:
                self._conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
            cur = await self._conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (LOCK_KEY,)
            )
            row = await cur.fetchone()
        except psycopg.Error:
            await self._drop()
            return False
        self._leading = bool(row and row[0])
        return self._leading

    async def check(self) -> bool:
        import psycopg

        if not self._leading or self._conn is None:
            return False
        try:
            await self._conn.execute("SELECT 1")
        except psycopg.Error:
            await self._drop()
            return False
        return True

    async def release(self) -> None:
        if self._leading and self._conn is not None:
            with contextlib.suppress(Exception):  # closing the session releases it anyway
                await self._conn.execute(
                    "SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (LOCK_KEY,)
                )
        await self._drop()

    async def _drop(self) -> None:
        conn, self._conn, self._leading = self._conn, None, False
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()  # ending the session releases the lock


class SqliteLeadership:
    """An exclusive ``flock`` on ``<db>.scheduler.lock``."""

    def __init__(self, db_path: str) -> None:
        self.path = f"{db_path}.scheduler.lock"
        self._fd: int | None = None

    async def acquire(self) -> bool:
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    async def check(self) -> bool:
        return self._fd is not None

    async def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def leadership_for(url: str) -> Leadership:
    """The leadership lock of the run store at ``url``."""
    parsed = parse_url(url)
    if parsed.backend == "postgres":
        return PostgresLeadership(url)
    return SqliteLeadership(parsed.sqlite_path)
