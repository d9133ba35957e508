"""The SQLite run store's worker plane: claim, heartbeat, release, finish, events (§3.3).

The same logic as PostgreSQL under ``BEGIN IMMEDIATE`` (SQLite's one write
lock, which serialises every writer on the host): the candidates are selected
first, then updated row by row. Times are REAL unix seconds from this
process's ``time.time()``. Every write for a held run names its fence in its
``UPDATE``; when that matches no row the transaction rolls back and
:class:`FenceLostError` is raised.

Each operation is one function run on the store's own connection thread (one
hop per operation, not per statement).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tether.checkpointing import EncryptionError
from tether.runtime.errors import FenceLostError, RuntimeSchemaError
from tether.runtime.models import Run
from tether.runtime.store.base import Claim, Held, Hold, NewEvent, Outcome, WorkerInfo
from tether.runtime.store.control import (
    MISSING_SCHEMA,
    attempts_exceeded,
    finish_params,
    finished_data,
    unreadable,
)
from tether.runtime.store.encoding import dumps
from tether.runtime.store.rows import SQLITE, Dialect

__all__ = ["RunDB", "SqliteWorkerPlane", "insert_events", "write"]

log = logging.getLogger("tether.runtime")


class RunDB(sqlite3.Connection):
    """A run store connection that knows how to decode (and open) its rows."""

    rows: Dialect = SQLITE


T = TypeVar("T")

_PENDING = """
SELECT r.run_id, NULL AS previous_worker
  FROM tether_runs r JOIN tether_threads t ON t.thread_id = r.thread_id
 WHERE r.status = 'pending' AND r.available_at <= :now
   AND r.graph_id IN (SELECT value FROM json_each(:graphs))
   AND t.active_run_id IS NULL
   AND NOT EXISTS (SELECT 1 FROM tether_runs h WHERE h.thread_id = r.thread_id
                      AND h.status = 'pending' AND h.seq < r.seq)
 ORDER BY r.available_at, r.seq LIMIT :limit"""
_EXPIRED = """
SELECT r.run_id, r.worker_id AS previous_worker FROM tether_runs r
 WHERE r.status = 'running' AND r.lease_expires_at < :now
   AND r.graph_id IN (SELECT value FROM json_each(:graphs))
 ORDER BY r.lease_expires_at LIMIT :limit"""
_CLAIM = """
UPDATE tether_runs
   SET status = 'running', fence = fence + 1, attempt = attempt + 1, worker_id = :worker,
       lease_expires_at = :now + :lease, started_at = COALESCE(started_at, :now),
       updated_at = :now, last_seq = last_seq + 1
 WHERE run_id = :run
RETURNING *"""
_FINISH_THREAD = """
UPDATE tether_threads
   SET active_run_id = NULL,
       status = CASE WHEN EXISTS (SELECT 1 FROM tether_runs p
                                   WHERE p.thread_id = :thread AND p.status = 'pending')
                     THEN 'busy' ELSE :thread_status END,
       state_values = CASE WHEN :keep THEN state_values ELSE :values END,
       interrupts = COALESCE(:interrupts, interrupts),
       error = :thread_error, updated_at = :now, state_updated_at = :now
 WHERE thread_id = :thread AND active_run_id = :run"""
_FINISH_RUN = """
UPDATE tether_runs
   SET status = :status, worker_id = NULL, lease_expires_at = NULL,
       waiting_on = :waiting_on, error = :error, ended_reason = :reason,
       ended_at = CASE WHEN :status = 'interrupted' THEN NULL ELSE :now END,
       input = NULL, input_kind = 'none', last_seq = last_seq + :bump, updated_at = :now
 WHERE run_id = :run AND fence = :fence AND status = 'running'
RETURNING *"""
_RELEASE_RUN = """
UPDATE tether_runs
   SET status = 'pending', worker_id = NULL, lease_expires_at = NULL, available_at = :now,
       attempt = attempt - :refund, last_seq = last_seq + 1, updated_at = :now
 WHERE run_id = :run AND fence = :fence AND status = 'running'
RETURNING *"""


def write(db: RunDB, fn: Callable[[RunDB, float], T]) -> T:
    """``fn(db, now)`` as one ``BEGIN IMMEDIATE`` transaction: committed, or rolled back."""
    db.execute("BEGIN IMMEDIATE")
    try:
        result = fn(db, time.time())
    except BaseException:
        db.rollback()
        raise
    db.commit()
    return result


def insert_events(
    db: RunDB,
    run_id: str,
    base: int,
    events: Sequence[NewEvent],
    now: float,
    *,
    fence: int | None = None,
    worker: str | None = None,
) -> None:
    """Insert ``events`` as seqs ``base + 1 …`` (the caller reserved them on the run row)."""

    def seal(data: Any, seq: str) -> str:
        return db.rows.sealer.seal(data, "tether.event", run_id, seq)

    db.executemany(
        "INSERT INTO tether_run_events (run_id, seq, kind, ns, data, fence, worker_id, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (run_id, base + i, e.kind, e.ns, seal(e.data, str(base + i)), fence, worker, now)
            for i, e in enumerate(events, start=1)
        ],
    )


def _fenced(row: sqlite3.Row | None, hold: Hold) -> sqlite3.Row:
    if row is None:
        raise FenceLostError(hold.run_id, hold.fence)
    return row


def _claim(db: RunDB, now: float, sql: str, worker: str, params: dict[str, Any]) -> list[Claim]:
    claims = []
    for candidate in db.execute(sql, {**params, "now": now}).fetchall():
        run_id = candidate["run_id"]
        row = db.execute(
            _CLAIM, {"worker": worker, "now": now, "lease": params["lease"], "run": run_id}
        ).fetchone()
        db.execute(
            "UPDATE tether_threads SET active_run_id = ?, status = 'busy', updated_at = ? "
            "WHERE thread_id = ?",
            (run_id, now, row["thread_id"]),
        )
        previous = candidate["previous_worker"]
        fence = int(row["fence"])
        data = {"attempt": row["attempt"], "resumes": row["resumes"], "worker_id": worker}
        data.update(fence=fence, **({"took_over_from": previous} if previous else {}))
        started = [NewEvent("run.started", data)]
        insert_events(db, run_id, row["last_seq"] - 1, started, now, fence=fence, worker=worker)
        try:
            run = db.rows.run(row)
        except EncryptionError as exc:
            hold = Hold(run_id, row["thread_id"], worker, fence)
            log.error("worker %s: run %s cannot be read; failing it: %s", worker, run_id, exc)
            finish_row(db, now, hold, unreadable(run_id, exc))
            continue
        if run.attempt > run.max_attempts:
            hold = Hold(run_id, run.thread_id, worker, run.fence)
            finish_in(db, now, hold, attempts_exceeded(run))
        else:
            claims.append(Claim(run, previous))
    return claims


def finish_in(
    db: RunDB, now: float, hold: Hold, outcome: Outcome, events: Sequence[NewEvent] = ()
) -> Run:
    """Finish a held run inside the caller's write transaction (§3.3.5); ``events``
    are appended first, then ``run.finished``."""
    return db.rows.run(finish_row(db, now, hold, outcome, events))


def finish_row(
    db: RunDB, now: float, hold: Hold, outcome: Outcome, events: Sequence[NewEvent] = ()
) -> Any:
    """:func:`finish_in`, answering the run's row as stored (not opened)."""
    written = [*events, NewEvent("run.finished", finished_data(outcome))]
    params = {**finish_params(hold, outcome, db.rows.sealer), "now": now, "bump": len(written)}
    db.execute(_FINISH_THREAD, params)
    row = _fenced(db.execute(_FINISH_RUN, params).fetchone(), hold)
    base = row["last_seq"] - len(written)
    insert_events(db, hold.run_id, base, written, now, fence=hold.fence, worker=hold.worker_id)
    return row


class SqliteWorkerPlane:
    """Worker-plane methods of ``SqliteRunStore``: one connection, one thread."""

    _db: RunDB
    _executor: ThreadPoolExecutor

    async def _run(self, fn: Callable[[RunDB], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, self._db)
        except sqlite3.OperationalError as exc:
            if str(exc).startswith("no such table: tether_"):
                raise RuntimeSchemaError(MISSING_SCHEMA) from exc
            raise

    async def _write(self, fn: Callable[[RunDB, float], T]) -> T:
        return await self._run(lambda db: write(db, fn))

    async def register_worker(self, worker: WorkerInfo) -> None:
        def register(db: RunDB, now: float) -> None:
            db.execute(
                """INSERT INTO tether_workers (worker_id, host, pid, graphs, concurrency,
                       started_at, last_heartbeat) VALUES (?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (worker_id) DO UPDATE
                      SET graphs = excluded.graphs, concurrency = excluded.concurrency,
                          last_heartbeat = excluded.last_heartbeat, stopping = 0""",
                (
                    worker.worker_id,
                    worker.host,
                    worker.pid,
                    dumps(list(worker.graphs)),
                    worker.concurrency,
                    now,
                    now,
                ),
            )

        await self._write(register)

    async def unregister_worker(self, worker_id: str) -> None:
        await self._write(
            lambda db, _: db.execute("DELETE FROM tether_workers WHERE worker_id = ?", (worker_id,))
        )

    async def claim(
        self, worker_id: str, *, graphs: Sequence[str], limit: int, lease: float
    ) -> builtins.list[Claim]:
        return await self._claim(_PENDING, worker_id, graphs, limit, lease)

    async def claim_expired(
        self, worker_id: str, *, graphs: Sequence[str], limit: int, lease: float
    ) -> builtins.list[Claim]:
        return await self._claim(_EXPIRED, worker_id, graphs, limit, lease)

    async def _claim(
        self, sql: str, worker: str, graphs: Sequence[str], limit: int, lease: float
    ) -> builtins.list[Claim]:
        if limit <= 0 or not graphs:
            return []
        params = {"graphs": dumps(list(graphs)), "limit": limit, "lease": lease}
        return await self._write(lambda db, now: _claim(db, now, sql, worker, params))

    async def heartbeat(self, worker_id: str, *, lease: float) -> builtins.list[Held]:
        def beat(db: RunDB, now: float) -> list[Held]:
            rows = db.execute(
                """UPDATE tether_runs SET lease_expires_at = ? + ?
                    WHERE worker_id = ? AND status = 'running'
                RETURNING run_id, fence, cancel_action, cancel_reason, deadline_at""",
                (now, lease, worker_id),
            ).fetchall()
            db.execute(
                "UPDATE tether_workers SET last_heartbeat = ? WHERE worker_id = ?",
                (now, worker_id),
            )
            return [Held(r[0], int(r[1]), r[2], r[3], SQLITE.maybe_time(r[4])) for r in rows]

        return await self._write(beat)

    async def release(self, hold: Hold, *, reason: str = "", retry: bool = False) -> Run:
        def release(db: RunDB, now: float) -> Run:
            db.execute(
                "UPDATE tether_threads SET active_run_id = NULL, updated_at = ? "
                "WHERE thread_id = ? AND active_run_id = ?",
                (now, hold.thread_id, hold.run_id),
            )
            params = {"now": now, "refund": 0 if retry else 1, "run": hold.run_id}
            row = _fenced(
                db.execute(_RELEASE_RUN, {**params, "fence": hold.fence}).fetchone(), hold
            )
            data = {"reason": reason, "retry": retry, "attempt": row["attempt"]}
            insert_events(
                db,
                hold.run_id,
                row["last_seq"] - 1,
                [NewEvent("run.released", data)],
                now,
                fence=hold.fence,
                worker=hold.worker_id,
            )
            return db.rows.run(row)

        return await self._write(release)

    async def finish(self, hold: Hold, outcome: Outcome, events: Sequence[NewEvent] = ()) -> Run:
        return await self._write(lambda db, now: finish_in(db, now, hold, outcome, events))

    async def append_events(self, hold: Hold, events: Sequence[NewEvent]) -> int:
        def append(db: RunDB, now: float) -> int:
            row = db.execute(
                "UPDATE tether_runs SET last_seq = last_seq + ? "
                "WHERE run_id = ? AND fence = ? AND status = 'running' RETURNING last_seq",
                (len(events), hold.run_id, hold.fence),
            ).fetchone()
            last = int(_fenced(row, hold)[0])
            insert_events(
                db,
                hold.run_id,
                last - len(events),
                events,
                now,
                fence=hold.fence,
                worker=hold.worker_id,
            )
            return last

        return await self._write(append)

    async def verify(self, run_id: str, fence: int) -> bool:
        def verify(db: RunDB) -> bool:
            row = db.execute(
                "SELECT 1 FROM tether_runs WHERE run_id = ? AND fence = ? AND status = 'running'",
                (run_id, fence),
            ).fetchone()
            return row is not None

        return await self._run(verify)
