"""PostgreSQL setup transactions that a stopped process cannot hold up forever.

tether creates and migrates its tables inside a transaction that first takes a
transaction-scoped advisory lock, so concurrent processes starting against one
database set it up one at a time. A holder that dies releases the lock with its
connection. A holder that is *stopped* (SIGSTOP, a paused debugger, a frozen
VM) would keep it, and every process starting against the database would wait
behind it with no end and no message.

So each setup transaction first sets ``idle_in_transaction_session_timeout``:
when the holder sits idle inside the transaction for
:data:`SETUP_IDLE_TIMEOUT_MS`, the server ends its session, the transaction
rolls back (nothing half-applied), the lock goes with it, and the next process
sets the database up. A live holder is never idle that long: setup is a short
run of statements sent one after another.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["SETUP_IDLE_TIMEOUT_MS", "lock_for_setup"]

SETUP_IDLE_TIMEOUT_MS = 30_000


async def lock_for_setup(
    execute: Callable[..., Awaitable[Any]], lock_sql: str, params: tuple[Any, ...] = ()
) -> None:
    """In the caller's open transaction: set the idle timeout, then take the lock.

    ``execute`` is a psycopg ``AsyncConnection.execute`` or ``AsyncCursor.execute``;
    ``lock_sql`` takes the advisory lock (``pg_advisory_xact_lock``).
    """
    await execute(f"SET LOCAL idle_in_transaction_session_timeout = {SETUP_IDLE_TIMEOUT_MS}")
    await execute(lock_sql, params)
