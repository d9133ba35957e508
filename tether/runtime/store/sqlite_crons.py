"""The SQLite run store's crons and scheduler statements (§2.10, §3.8, §3.12).

The same rules as PostgreSQL under ``BEGIN IMMEDIATE``: a due cron's slot is
recorded with ``INSERT … ON CONFLICT DO NOTHING`` on ``tether_cron_fires``,
the run is created by the same function as ``create_run`` and
``next_run_at`` moves on, all in one write transaction. Times passed in (the
scheduler's ``now``) decide what is due; rows written carry this process's
clock, as every other SQLite write does.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tether.runtime.errors import AlreadyExistsError
from tether.runtime.models import Assistant, Cron, Run
from tether.runtime.store.crons import (
    ROLLED_BACK,
    ValidCron,
    deadline_events,
    deadline_outcome,
)
from tether.runtime.store.rows import Dialect
from tether.runtime.store.sqlite_worker import RunDB, SqliteWorkerPlane, insert_events
from tether.runtime.store.types import Created
from tether.runtime.store.validation import ValidRun

__all__ = ["SqliteCronHooks"]

DB = RunDB
_COLUMNS = frozenset({"schedule", "timezone", "enabled", "end_time", "next_run_at"})
_DUE = """
SELECT * FROM tether_crons
 WHERE enabled = 1 AND next_run_at <= :now AND (end_time IS NULL OR end_time >= :now)"""
_TIMEOUT_RUN = """
UPDATE tether_runs
   SET status = 'timeout', error = :error, ended_reason = :reason, ended_at = :at,
       input = NULL, input_kind = 'none', updated_at = :at, last_seq = last_seq + :n,
       worker_id = NULL, lease_expires_at = NULL
 WHERE run_id = :run AND deadline_at < :now
   AND (status IN ('pending', 'interrupted')
        OR (status = 'running' AND lease_expires_at < :now))
RETURNING last_seq"""
_TIMEOUT_THREAD = """
UPDATE tether_threads
   SET status = CASE WHEN :busy THEN 'busy' ELSE 'error' END,
       error = CASE WHEN :busy THEN error ELSE :error END, updated_at = :at,
       active_run_id = NULLIF(active_run_id, :run)
 WHERE thread_id = :thread"""
_BUSY = """
SELECT EXISTS (SELECT 1 FROM tether_runs WHERE thread_id = ?
                  AND status IN ('pending', 'running'))"""


def _seconds(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def _fire(
    db: DB,
    at: float,
    cron: Cron,
    *,
    now: float,
    next_run_at: float,
    run: tuple[ValidRun, Assistant] | None,
    create: Callable[[DB, float, ValidRun, Assistant, str], Created],
) -> Created | None:
    due = db.execute(_DUE + " AND cron_id = :cron", {"now": now, "cron": cron.cron_id}).fetchone()
    if due is None:  # fired and moved on, or disabled
        return None
    first = db.execute(
        "INSERT INTO tether_cron_fires (cron_id, fire_at, run_id) VALUES (?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (cron.cron_id, due["next_run_at"], None if run is None else run[0].run_id),
    ).rowcount
    created = None
    if first and run is not None:
        created = create(db, at, run[0], run[1], cron.tenant_id)
    db.execute(
        "UPDATE tether_crons SET next_run_at = ?, updated_at = ? WHERE cron_id = ?",
        (next_run_at, at, cron.cron_id),
    )
    return created


def _expire(db: DB, at: float, run: Run, now: float) -> bool:
    outcome = deadline_outcome(run)
    events = deadline_events(run, outcome)
    sealer = db.rows.sealer
    error = sealer.seal(outcome.error, "tether.run", run.run_id, "error")
    thread_error = sealer.seal(outcome.error, "tether.thread", run.thread_id, "error")
    row = db.execute(
        _TIMEOUT_RUN,
        {
            "error": error,
            "reason": outcome.reason,
            "at": at,
            "n": len(events),
            "run": run.run_id,
            "now": now,
        },
    ).fetchone()
    if row is None:  # resumed, cancelled or continued meanwhile
        return False
    insert_events(db, run.run_id, int(row[0]) - len(events), events, at)
    busy = bool(db.execute(_BUSY, (run.thread_id,)).fetchone()[0])
    db.execute(
        _TIMEOUT_THREAD,
        {
            "busy": busy,
            "error": thread_error,
            "at": at,
            "thread": run.thread_id,
            "run": run.run_id,
        },
    )
    return True


class SqliteCronHooks(SqliteWorkerPlane):
    """The cron hooks of ``SqliteRunStore`` (see :class:`~.crons.CronPlane`)."""

    if TYPE_CHECKING:

        @property
        def rows(self) -> Dialect: ...

        @staticmethod
        def _create_run_tx(
            db: DB, now: float, v: ValidRun, assistant: Assistant, tenant: str
        ) -> Created: ...

    async def _insert_cron(self, c: ValidCron, tenant: str) -> Cron:
        def insert(db: DB, at: float) -> Cron:
            try:
                db.execute(
                    """INSERT INTO tether_crons (cron_id, tenant_id, assistant_id, thread_id,
                           schedule, timezone, payload, metadata, on_run_completed, enabled,
                           end_time, next_run_at, created_at, updated_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                    (
                        c.cron_id,
                        tenant,
                        c.assistant_id,
                        c.thread_id,
                        c.schedule,
                        c.timezone,
                        self.rows.sealer.seal_json_column(
                            c.payload_json, "tether.cron", c.cron_id, "payload"
                        ),
                        c.metadata_json,
                        c.on_run_completed,
                        c.enabled,
                        _seconds(c.end_time),
                        _seconds(c.next_run_at),
                        at,
                        at,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise AlreadyExistsError(f"cron {c.cron_id} already exists") from exc
            row = db.execute("SELECT * FROM tether_crons WHERE cron_id = ?", (c.cron_id,))
            return self.rows.cron(row.fetchone())

        return await self._write(insert)

    async def _find_cron(self, cron_id: str, tenant: str) -> Cron | None:
        rows = await self._run(
            lambda db: db.execute(
                "SELECT * FROM tether_crons WHERE cron_id = ? AND tenant_id = ?",
                (cron_id, tenant),
            ).fetchall()
        )
        return self.rows.cron(rows[0]) if rows else None

    async def _list_crons(
        self, tenant: str, filters: Mapping[str, Any], limit: int, offset: int
    ) -> builtins.list[Cron]:
        clause = "".join(f" AND {column} = ?" for column in filters)
        sql = f"SELECT * FROM tether_crons WHERE tenant_id = ?{clause}"
        sql += " ORDER BY created_at, cron_id LIMIT ? OFFSET ?"
        params = [tenant, *filters.values(), limit, offset]
        rows = await self._run(lambda db: db.execute(sql, params).fetchall())
        return [self.rows.cron(r) for r in rows]

    async def _update_cron(
        self, cron_id: str, tenant: str, changes: Mapping[str, Any]
    ) -> Cron | None:
        assert set(changes) <= _COLUMNS
        values = [_seconds(v) if isinstance(v, datetime) else v for v in changes.values()]
        sets = "".join(f"{column} = ?, " for column in changes)

        def update(db: DB, at: float) -> Cron | None:
            row = db.execute(
                f"UPDATE tether_crons SET {sets}updated_at = ? "
                "WHERE cron_id = ? AND tenant_id = ? RETURNING *",
                [*values, at, cron_id, tenant],
            ).fetchone()
            return None if row is None else self.rows.cron(row)

        return await self._write(update)

    async def _delete_cron(self, cron_id: str, tenant: str) -> bool:
        deleted = await self._write(
            lambda db, _: (
                db.execute(
                    "DELETE FROM tether_crons WHERE cron_id = ? AND tenant_id = ?",
                    (cron_id, tenant),
                ).rowcount
            )
        )
        return bool(deleted)

    async def _due_crons(self, now: datetime, limit: int) -> builtins.list[Cron]:
        sql = _DUE + " ORDER BY next_run_at LIMIT :limit"
        params = {"now": now.timestamp(), "limit": limit}
        rows = await self._run(lambda db: db.execute(sql, params).fetchall())
        return [self.rows.cron(r) for r in rows]

    async def _fire_cron(
        self,
        cron: Cron,
        now: datetime,
        next_run_at: datetime,
        run: tuple[ValidRun, Assistant] | None,
    ) -> Created | None:
        create = self._create_run_tx
        return await self._write(
            lambda db, at: _fire(
                db,
                at,
                cron,
                now=now.timestamp(),
                next_run_at=next_run_at.timestamp(),
                run=run,
                create=create,
            )
        )

    async def _expire_deadlines(self, now: datetime, limit: int) -> builtins.list[Run]:
        rows = await self._run(
            lambda db: db.execute(
                """SELECT * FROM tether_runs WHERE deadline_at < :now
                      AND (status IN ('pending', 'interrupted')
                           OR (status = 'running' AND lease_expires_at < :now))
                    ORDER BY deadline_at LIMIT :limit""",
                {"now": now.timestamp(), "limit": limit},
            ).fetchall()
        )
        expired = []
        for run in (self._db.rows.run(r) for r in rows):

            def expire(db: DB, at: float, run: Run = run) -> bool:
                return _expire(db, at, run, now.timestamp())

            if await self._write(expire):
                expired.append(run)
        return expired

    async def _waiting_runs(self, limit: int) -> builtins.list[Run]:
        rows = await self._run(
            lambda db: db.execute(
                """SELECT * FROM tether_runs WHERE status = 'interrupted'
                      AND waiting_on <> '[]' ORDER BY updated_at LIMIT ?""",
                (limit,),
            ).fetchall()
        )
        return [self._db.rows.run(r) for r in rows]

    async def _rolled_back_runs(
        self, since: datetime, until: datetime, limit: int
    ) -> builtins.list[Run]:
        rows = await self._run(
            lambda db: db.execute(
                f"""SELECT * FROM tether_runs WHERE {ROLLED_BACK}
                      AND ended_at BETWEEN ? AND ? ORDER BY ended_at LIMIT ?""",
                (since.timestamp(), until.timestamp(), limit),
            ).fetchall()
        )
        return [self._db.rows.run(r) for r in rows]

    async def _remove_workers(self, before: datetime) -> int:
        removed = await self._write(
            lambda db, _: (
                db.execute(
                    "DELETE FROM tether_workers WHERE last_heartbeat < ?", (before.timestamp(),)
                ).rowcount
            )
        )
        return int(removed)

    async def _thread_tenant(self, thread_id: str) -> str | None:
        rows = await self._run(
            lambda db: db.execute(
                "SELECT tenant_id FROM tether_threads WHERE thread_id = ?", (thread_id,)
            ).fetchall()
        )
        return str(rows[0][0]) if rows else None
