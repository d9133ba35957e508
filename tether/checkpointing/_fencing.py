"""Fencing inside the write transaction: a worker that lost its run commits nothing for it.

A worker executing a run lends the layers below it a
:class:`~tether.boundaries.RunGuard`. When the run store and the checkpoints
share one database (``guard.same_database``), every write the run makes checks
the guard's fence *in the same transaction* as the write itself, so there is no
window between the check and the write:

* **PostgreSQL**: the write transaction starts with
  ``SELECT tether_assert_fence(run_id, token)`` (a function of the run store's
  schema). It takes ``FOR SHARE`` on the run row, so a takeover waits for (or
  skips) the write until it commits; after a takeover it raises SQLSTATE
  ``TL001`` and the transaction aborts. The saver queues it in the same
  pipeline as its own statements: no extra round trip.
* **SQLite**: the saver's connection carries a TEMP table of the fences this
  process holds, one row per thread (one running run per thread), and TEMP
  triggers on ``checkpoints``, ``writes``, ``tether_records`` and
  ``tether_steps`` that abort an insert, update or delete (but of orphaned
  ``writes``) of a held thread whose fence moved on (``tether_fence_lost``).
  The trigger runs inside the write's transaction, which holds SQLite's single
  write lock, so a takeover (another write transaction) is ordered before or
  after it, never between.

Both errors become :class:`~tether.boundaries.LeaseLostError` (:func:`lease_lost`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.boundaries import Fence, LeaseLostError, current_guard
from tether.checkpointing._delegating import innermost

__all__ = [
    "ASSERT_FENCE_SQL",
    "ASSERT_LEASE_SQL",
    "FENCED_TRANSACTION_TIMEOUT_MS",
    "FENCE_LOST",
    "FENCE_SQLSTATE",
    "QUEUED_TRANSACTION_TIMEOUT_MS",
    "RUN_SCOPE_SETTING",
    "assert_fence",
    "drop_fence",
    "drop_sqlite_fence",
    "fence_errors",
    "fenced_transaction",
    "hold_fence",
    "hold_sqlite_fence",
    "install_sqlite_fence",
    "lease_lost",
    "queued_transaction",
    "run_scope",
    "scope_reads",
    "transaction_fence",
]

# The check and the run scope in one statement: a scoped role's row-level
# policies verify the scope (run, fence and the claim's lease secret) against
# the run's live lease at every use (see tether.runtime.worker_role).
RUN_SCOPE_SETTING = "tether.run_scope"
ASSERT_FENCE_SQL = (
    f"SELECT tether_assert_fence(%s, %s), set_config('{RUN_SCOPE_SETTING}', %s, true)"
)
# A claim with a lease secret (a run-scoped worker role): the role cannot read
# the run store, so a SECURITY DEFINER function checks the fence and the secret.
ASSERT_LEASE_SQL = (
    f"SELECT tether_assert_lease(%s, %s, %s), set_config('{RUN_SCOPE_SETTING}', %s, true)"
)
_READ_SCOPE_SQL = f"SELECT set_config('{RUN_SCOPE_SETTING}', %s, true)"
# A fenced PostgreSQL transaction holds a share lock on the run row, which a
# takeover's claim skips. A client stopped in the middle of a pipeline (before
# its Sync) is not "idle in transaction" to the server, so only a transaction
# timeout (PostgreSQL 17+) frees the row; a fenced write never needs this long.
FENCED_TRANSACTION_TIMEOUT_MS = 10_000
# PostgreSQL 17+: the transaction's timeout, set by the fence check's own statement.
_TIMEOUT_SQL = f", set_config('transaction_timeout', '{FENCED_TRANSACTION_TIMEOUT_MS}', true)"
FENCE_SQLSTATE = "TL001"  # raised by tether_assert_fence (PostgreSQL)
FENCE_LOST = "tether_fence_lost"  # raised by the TEMP triggers (SQLite)

# (table, event, the row's thread): one TEMP trigger each. Deletes from ``writes``
# are left out: removing orphaned writes is a clean-up across threads.
_FENCED = tuple(
    (table, event, "OLD" if event == "DELETE" else "NEW")
    for table in ("checkpoints", "writes", "tether_records", "tether_steps")
    for event in ("INSERT", "UPDATE", "DELETE")
    if (table, event) != ("writes", "DELETE")
)
_HELD_TABLE = """CREATE TEMP TABLE IF NOT EXISTS tether_held (
    thread_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, fence INTEGER NOT NULL)"""
_TRIGGER = """CREATE TEMP TRIGGER IF NOT EXISTS tether_fence_{table}_{event_name}
BEFORE {event} ON main.{table}
WHEN EXISTS (SELECT 1 FROM temp.tether_held h WHERE h.thread_id = {row}.thread_id)
 AND NOT EXISTS (SELECT 1 FROM temp.tether_held h
                   JOIN main.tether_runs r ON r.run_id = h.run_id AND r.fence = h.fence
                                          AND r.status = 'running'
                  WHERE h.thread_id = {row}.thread_id)
BEGIN SELECT RAISE(ABORT, '{lost}'); END"""


def transaction_fence() -> Fence | None:
    """The fence a write in this context must check in its own transaction, if any.

    ``None`` outside a run, and when the run store lives elsewhere than the
    checkpoints (then the runtime verifies before the write instead).
    """
    guard = current_guard()
    if guard is None or not guard.same_database:
        return None
    return guard.fence


def lease_lost(exc: BaseException) -> LeaseLostError | None:
    """The :class:`LeaseLostError` a database error means, or ``None`` for any other error.

    PostgreSQL's ``tether_assert_fence`` raises SQLSTATE ``TL001``; SQLite's
    fence triggers raise ``IntegrityError('tether_fence_lost')``.
    """
    lost = getattr(exc, "sqlstate", None) == FENCE_SQLSTATE or (
        isinstance(exc, sqlite3.IntegrityError) and FENCE_LOST in str(exc)
    )
    if not lost:
        return None
    guard = current_guard()
    which = (
        f"run {guard.fence.run_id} (fence {guard.fence.token})" if guard is not None else "a run"
    )
    return LeaseLostError(
        f"{which}: the write was refused in its transaction because another worker "
        "holds the run now; nothing was written"
    )


async def assert_fence(cur: Any) -> None:
    """PostgreSQL: check the run's fence as the next statement of ``cur``'s transaction.

    A no-op without a same-database guard in this context. The caller opened
    the transaction; in pipeline mode the check is queued with the statements
    that follow it, so it costs no round trip. On PostgreSQL 17+ the
    transaction also gets a ``transaction_timeout``: a process stopped between
    two statements of the pipeline would otherwise keep the run row locked,
    and its runs from being taken over, until it continues. Wrap the transaction in
    :func:`fence_errors`, which sees the error wherever psycopg raises it.
    """
    fence = transaction_fence()
    if fence is None:
        return
    # One statement, not two: every fenced transaction of a run sends it.
    timeout = cur.connection.info.server_version >= 170000
    scope = run_scope(fence)
    params: tuple[Any, ...]
    if fence.secret:
        sql, params = ASSERT_LEASE_SQL, (fence.run_id, fence.token, fence.secret, scope)
    else:
        sql, params = ASSERT_FENCE_SQL, (fence.run_id, fence.token, scope)
    await cur.execute(sql + _TIMEOUT_SQL if timeout else sql, params)


# Queued when the block of a one-sync transaction raises: the pipeline's Sync then
# rolls the transaction back instead of committing what the block sent so far.
_ABANDON_SQL = "DO $$BEGIN RAISE EXCEPTION 'transaction abandoned by its client'; END$$"
# A queued transaction may wait for row locks (a run's creation behind a cron's fire),
# which its timeout counts too: longer than a fenced write's, to free only a stopped client.
QUEUED_TRANSACTION_TIMEOUT_MS = 30_000
_TRANSACTION_TIMEOUT_SQL = (
    f"SELECT set_config('transaction_timeout', '{QUEUED_TRANSACTION_TIMEOUT_MS}', true)"
)


@asynccontextmanager
async def _one_sync(cur: Any) -> AsyncIterator[None]:
    """The block's statements on ``cur`` as one implicit transaction, sent in one pipeline.

    PostgreSQL runs the statements a pipeline sends before its ``Sync`` as one
    implicit transaction, committed at the ``Sync`` and rolled back there if
    one failed. psycopg sends a ``Sync`` only when the pipeline ends or is told
    to (``transaction()``, ``commit()``, ``rollback()``, ``Pipeline.sync()``; a
    fetch only flushes), so the block must do none of those. When the block
    raises, a failing statement is queued first, so the ``Sync`` rolls back.
    """
    if not cur.connection.autocommit:  # psycopg would BEGIN (and sync) first
        raise ValueError("a one-sync transaction needs an autocommit connection")
    async with cur.connection.pipeline() as pipeline:
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                await cur.execute(_ABANDON_SQL, prepare=False)
                await pipeline.sync()
            raise


@asynccontextmanager
async def queued_transaction(cur: Any) -> AsyncIterator[None]:
    """PostgreSQL: the block's statements on ``cur`` in one transaction, sent together.

    One round trip when the block fetches nothing, and one more per fetch;
    nothing is committed unless every statement and the block succeed.
    (psycopg's ``conn.transaction()`` costs a round trip for ``BEGIN`` and one
    for ``COMMIT``, and without a pipeline every statement is a round trip.) A
    statement's error is raised at the next fetch or at the end of the block,
    not by its ``execute``. The block must not commit, roll back or sync (see
    :func:`_one_sync`). On PostgreSQL 17+ the transaction gets a
    ``transaction_timeout`` (:data:`QUEUED_TRANSACTION_TIMEOUT_MS`): a client
    stopped in the middle of a pipeline is not "idle in transaction" to the
    server, and would hold its locks.
    """
    async with _one_sync(cur):
        if cur.connection.info.server_version >= 170000:
            await cur.execute(_TRANSACTION_TIMEOUT_SQL)
        yield


@asynccontextmanager
async def fenced_transaction(cur: Any, *, pipeline: bool = True) -> AsyncIterator[None]:
    """PostgreSQL: a :func:`queued_transaction` whose first statement checks the fence.

    The check (which also sets the timeout) travels with the write's own
    statements: a fenced write costs one round trip, as an unfenced one does.
    Without pipeline mode (``pipeline=False``: a libpq older than 14) it is a
    plain transaction. Wrap it in :func:`fence_errors`.
    """
    if not pipeline:
        async with cur.connection.transaction():
            await assert_fence(cur)
            yield
        return
    async with _one_sync(cur):
        await assert_fence(cur)
        yield


def run_scope(fence: Fence) -> str:
    """The value of ``tether.run_scope`` naming ``fence``'s run: ``run_id:token``, and
    ``:secret`` when the claim has a lease secret (a run-scoped worker role)."""
    if fence.secret:
        return f"{fence.run_id}:{fence.token}:{fence.secret}"
    return f"{fence.run_id}:{fence.token}"


async def scope_reads(cur: Any) -> bool:
    """PostgreSQL: name the run in this context as the scope of ``cur``'s next statements.

    For a restricted worker role, whose row-level policies show only the
    scoped run's thread. The setting is transaction-local: queue it in the
    same pipeline (one implicit transaction until the pipeline syncs) or
    transaction as the reads, so it costs no round trip. Returns ``False``
    (and sends nothing) outside a run whose run store shares this database.
    """
    fence = transaction_fence()
    if fence is None:
        return False
    await cur.execute(_READ_SCOPE_SQL, (run_scope(fence),))
    return True


@asynccontextmanager
async def fence_errors() -> AsyncIterator[None]:
    """Raise :class:`LeaseLostError` for a refused fence raised in the block."""
    try:
        yield
    except Exception as exc:
        lost = lease_lost(exc)
        if lost is not None:
            raise lost from exc
        raise


def install_sqlite_fence(db: sqlite3.Connection) -> None:
    """Create the TEMP fence table and the triggers of every fenced table that exists.

    Idempotent; run on the saver's own connection (TEMP objects are per
    connection). A table created later gets its triggers at the next call.
    """
    db.execute(_HELD_TABLE)
    tables = {
        row[0]
        for row in db.execute(
            "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name IN "
            "('checkpoints', 'writes', 'tether_records', 'tether_steps', 'tether_runs')"
        )
    }
    if "tether_runs" not in tables:
        return  # not a run store's file: nothing can be held here
    for table, event, row in _FENCED:
        if table in tables:
            db.execute(
                _TRIGGER.format(
                    table=table, event=event, event_name=event.lower(), row=row, lost=FENCE_LOST
                )
            )


def hold_sqlite_fence(db: sqlite3.Connection, fence: Fence) -> None:
    """From now on, writes of ``fence.thread_id`` on ``db`` need ``fence`` to be current."""
    install_sqlite_fence(db)
    db.execute(
        "INSERT OR REPLACE INTO temp.tether_held (thread_id, run_id, fence) VALUES (?, ?, ?)",
        (fence.thread_id, fence.run_id, fence.token),
    )
    _end_transaction(db)


def drop_sqlite_fence(db: sqlite3.Connection, fence: Fence) -> None:
    """Forget ``fence`` (only that claim: a later claim of the thread stays held)."""
    db.execute(_HELD_TABLE)
    db.execute(
        "DELETE FROM temp.tether_held WHERE thread_id = ? AND run_id = ? AND fence = ?",
        (fence.thread_id, fence.run_id, fence.token),
    )
    _end_transaction(db)


def _end_transaction(db: sqlite3.Connection) -> None:
    """Commit the transaction Python's sqlite3 opened for a DML statement.

    Left open, it would pin the connection's read snapshot: the saver's later
    reads would not see other processes' commits.
    """
    if db.in_transaction:
        db.commit()


async def hold_fence(saver: BaseCheckpointSaver[Any], fence: Fence) -> None:
    """Make ``saver``'s connection refuse writes of the fence's thread once it moves on.

    For savers that fence through their connection (SQLite); a no-op for the
    others (PostgreSQL checks the guard's fence in each transaction).
    """
    hold = getattr(innermost(saver), "hold_fence", None)
    if hold is not None:
        await hold(fence)


async def drop_fence(saver: BaseCheckpointSaver[Any], fence: Fence) -> None:
    """Undo :func:`hold_fence` once the run was finished or released."""
    drop = getattr(innermost(saver), "drop_fence", None)
    if drop is not None:
        await drop(fence)
