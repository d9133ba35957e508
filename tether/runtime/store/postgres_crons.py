"""The PostgreSQL run store's crons and scheduler statements (§2.10, §3.8, §3.12).

A due cron fires in one transaction: its row is locked with ``SKIP LOCKED``
(a second scheduler passes it by), the slot is recorded with ``INSERT …
ON CONFLICT DO NOTHING`` on ``tether_cron_fires`` (a slot fires at most once,
whatever the schedulers do), the run is created by the same statements as
``create_run``, and ``next_run_at`` moves to the first slot after now.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg

from tether.runtime.errors import AlreadyExistsError
from tether.runtime.models import Assistant, Cron, Run
from tether.runtime.store.crons import (
    ROLLED_BACK,
    ValidCron,
    deadline_events,
    deadline_outcome,
)
from tether.runtime.store.postgres_worker import (
    ENDED,
    Cursor,
    PostgresWorkerPlane,
    insert_events,
)
from tether.runtime.store.types import Created
from tether.runtime.store.validation import ValidRun

__all__ = ["PostgresCronHooks"]

_COLUMNS = frozenset({"schedule", "timezone", "enabled", "end_time", "next_run_at"})
_DUE = """
SELECT * FROM tether_crons
 WHERE enabled AND next_run_at <= %(now)s AND (end_time IS NULL OR end_time >= %(now)s)
 ORDER BY next_run_at LIMIT %(limit)s"""
_LOCK_DUE = """
SELECT next_run_at FROM tether_crons
 WHERE cron_id = %(cron)s AND enabled AND next_run_at <= %(now)s
   AND (end_time IS NULL OR end_time >= %(now)s)
   FOR UPDATE SKIP LOCKED"""
_TIMEOUT_RUN = """
UPDATE tether_runs
   SET status = 'timeout', error = %(error)s, ended_reason = %(reason)s, ended_at = now(),
       input = NULL, input_kind = 'none', updated_at = now(), last_seq = last_seq + %(n)s,
       worker_id = NULL, lease_expires_at = NULL
 WHERE run_id = %(run)s AND deadline_at < %(now)s
   AND (status IN ('pending', 'interrupted')
        OR (status = 'running' AND lease_expires_at < %(now)s))
RETURNING last_seq"""
_TIMEOUT_THREAD = """
UPDATE tether_threads
   SET status = CASE WHEN busy THEN 'busy' ELSE 'error' END,
       error = CASE WHEN busy THEN error ELSE %(error)s END, updated_at = now(),
       active_run_id = NULLIF(active_run_id, %(run)s)
  FROM (SELECT EXISTS (SELECT 1 FROM tether_runs r WHERE r.thread_id = %(thread)s
                          AND r.status IN ('pending', 'running')) AS busy) AS q
 WHERE thread_id = %(thread)s"""


class PostgresCronHooks(PostgresWorkerPlane):
    """The cron hooks of ``PostgresRunStore`` (see :class:`~.crons.CronPlane`)."""

    if TYPE_CHECKING:

        async def _create_run_in(
            self, cur: Cursor, v: ValidRun, assistant: Assistant, tenant: str
        ) -> Created: ...

    async def _insert_cron(self, c: ValidCron, tenant: str) -> Cron:
        async with self._tx() as cur:
            try:
                await cur.execute(
                    """INSERT INTO tether_crons (cron_id, tenant_id, assistant_id, thread_id,
                           schedule, timezone, payload, metadata, on_run_completed, enabled,
                           end_time, next_run_at)
                       VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s)
                       RETURNING *""",
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
                        c.end_time,
                        c.next_run_at,
                    ),
                )
            except psycopg.errors.UniqueViolation as exc:
                raise AlreadyExistsError(f"cron {c.cron_id} already exists") from exc
            row = await cur.fetchone()
            assert row is not None
            return self.rows.cron(row)

    async def _find_cron(self, cron_id: str, tenant: str) -> Cron | None:
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT * FROM tether_crons WHERE cron_id = %s AND tenant_id = %s",
                (cron_id, tenant),
            )
            row = await cur.fetchone()
        return None if row is None else self.rows.cron(row)

    async def _list_crons(
        self, tenant: str, filters: Mapping[str, Any], limit: int, offset: int
    ) -> builtins.list[Cron]:
        clause = "".join(f" AND {column} = %s" for column in filters)
        sql = f"SELECT * FROM tether_crons WHERE tenant_id = %s{clause}"
        sql += " ORDER BY created_at, cron_id LIMIT %s OFFSET %s"
        async with self._conn() as conn:
            cur = await conn.execute(sql, [tenant, *filters.values(), limit, offset])
            rows = await cur.fetchall()
        return [self.rows.cron(r) for r in rows]

    async def _update_cron(
        self, cron_id: str, tenant: str, changes: Mapping[str, Any]
    ) -> Cron | None:
        assert set(changes) <= _COLUMNS
        sets = "".join(f"{column} = %s, " for column in changes)
        async with self._tx() as cur:
            await cur.execute(
                f"UPDATE tether_crons SET {sets}updated_at = now() "
                "WHERE cron_id = %s AND tenant_id = %s RETURNING *",
                [*changes.values(), cron_id, tenant],
            )
            row = await cur.fetchone()
        return None if row is None else self.rows.cron(row)

    async def _delete_cron(self, cron_id: str, tenant: str) -> bool:
        async with self._tx() as cur:
            await cur.execute(
                "DELETE FROM tether_crons WHERE cron_id = %s AND tenant_id = %s RETURNING 1",
                (cron_id, tenant),
            )
            return await cur.fetchone() is not None

    async def _due_crons(self, now: datetime, limit: int) -> builtins.list[Cron]:
        async with self._conn() as conn:
            cur = await conn.execute(_DUE, {"now": now, "limit": limit})
            rows = await cur.fetchall()
        return [self.rows.cron(r) for r in rows]

    async def _fire_cron(
        self,
        cron: Cron,
        now: datetime,
        next_run_at: datetime,
        run: tuple[ValidRun, Assistant] | None,
    ) -> Created | None:
        async with self._tx() as cur:
            await cur.execute(_LOCK_DUE, {"cron": cron.cron_id, "now": now})
            due = await cur.fetchone()
            if due is None:  # fired and moved on, disabled, or another scheduler has it
                return None
            await cur.execute(
                "INSERT INTO tether_cron_fires (cron_id, fire_at, run_id) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (cron.cron_id, due["next_run_at"], None if run is None else run[0].run_id),
            )
            first = await cur.fetchone() is not None
            created = None
            if first and run is not None:
                created = await self._create_run_in(cur, run[0], run[1], cron.tenant_id)
            await cur.execute(
                "UPDATE tether_crons SET next_run_at = %s, updated_at = now() WHERE cron_id = %s",
                (next_run_at, cron.cron_id),
            )
            return created

    async def _expire_deadlines(self, now: datetime, limit: int) -> builtins.list[Run]:
        async with self._conn() as conn:
            cur = await conn.execute(
                """SELECT * FROM tether_runs WHERE deadline_at < %(now)s
                      AND (status IN ('pending', 'interrupted')
                           OR (status = 'running' AND lease_expires_at < %(now)s))
                    ORDER BY deadline_at LIMIT %(limit)s""",
                {"now": now, "limit": limit},
            )
            candidates = [self.rows.run(r) for r in await cur.fetchall()]
        return [run for run in candidates if await self._expire_one(run, now)]

    async def _expire_one(self, run: Run, now: datetime) -> bool:
        outcome = deadline_outcome(run)
        events = deadline_events(run, outcome)
        sealer = self.rows.sealer
        error = sealer.seal(outcome.error, "tether.run", run.run_id, "error")
        thread_error = sealer.seal(outcome.error, "tether.thread", run.thread_id, "error")
        async with self._tx() as cur:
            await cur.execute(
                "SELECT 1 FROM tether_threads WHERE thread_id = %s FOR UPDATE", (run.thread_id,)
            )
            await cur.execute(
                _TIMEOUT_RUN,
                {
                    "error": error,
                    "reason": outcome.reason,
                    "n": len(events),
                    "run": run.run_id,
                    "now": now,
                },
            )
            row = await cur.fetchone()
            if row is None:  # resumed, cancelled or continued meanwhile
                return False
            base = int(row["last_seq"]) - len(events)
            await insert_events(cur, run.run_id, base, events, sealer)
            await cur.execute(
                _TIMEOUT_THREAD,
                {"thread": run.thread_id, "error": thread_error, "run": run.run_id},
            )
            await cur.execute(ENDED, {"run": run.run_id, "thread": run.thread_id})
            return True

    async def _waiting_runs(self, limit: int) -> builtins.list[Run]:
        async with self._conn() as conn:
            cur = await conn.execute(
                """SELECT * FROM tether_runs WHERE status = 'interrupted'
                      AND waiting_on <> '[]'::jsonb ORDER BY updated_at LIMIT %s""",
                (limit,),
            )
            rows = await cur.fetchall()
        return [self.rows.run(r) for r in rows]

    async def _rolled_back_runs(
        self, since: datetime, until: datetime, limit: int
    ) -> builtins.list[Run]:
        async with self._conn() as conn:
            cur = await conn.execute(
                f"""SELECT * FROM tether_runs WHERE {ROLLED_BACK}
                      AND ended_at BETWEEN %s AND %s ORDER BY ended_at LIMIT %s""",
                (since, until, limit),
            )
            rows = await cur.fetchall()
        return [self.rows.run(r) for r in rows]

    async def _remove_workers(self, before: datetime) -> int:
        async with self._tx() as cur:
            await cur.execute("DELETE FROM tether_workers WHERE last_heartbeat < %s", (before,))
            return cur.rowcount

    async def _thread_tenant(self, thread_id: str) -> str | None:
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT tenant_id FROM tether_threads WHERE thread_id = %s", (thread_id,)
            )
            row = await cur.fetchone()
        return None if row is None else str(row["tenant_id"])
