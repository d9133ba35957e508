"""The PostgreSQL run store: pool, migrations and the control plane (§3.2, §3.3.7, §3.6, §3.7).

One ``AsyncConnectionPool`` of autocommit connections; each operation is one
explicit transaction. Locks are taken thread row first, then run rows, in every
transaction that takes both, so the control plane and the workers never
deadlock. Foreign tenants' objects are filtered in the same statement that
reads them and reported as not found.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from tether.checkpointing import KeyRing, abort_idle_transactions, redact
from tether.errors import BackendUnavailableError
from tether.runtime import migrations
from tether.runtime.errors import (
    AlreadyExistsError,
    RunNotActiveError,
    RunNotFoundError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from tether.runtime.ids import new_id, system_assistant_id
from tether.runtime.models import (
    Assistant,
    CancelAction,
    Run,
    RunEvent,
    RunStatus,
    Thread,
    ThreadStatus,
)
from tether.runtime.multitask import (
    BUSY_MESSAGE,
    TETHER_RUN_MARK,
    InflightRun,
    plan,
    superseded_reason,
)
from tether.runtime.store import control
from tether.runtime.store.base import Created, NewEvent
from tether.runtime.store.control import NewAssistant
from tether.runtime.store.crons import CronPlane
from tether.runtime.store.encoding import dumps
from tether.runtime.store.postgres_crons import PostgresCronHooks
from tether.runtime.store.postgres_edits import PostgresEditHooks
from tether.runtime.store.postgres_worker import ENDED, Cursor, insert_events
from tether.runtime.store.retention import RetentionPlane, Statement
from tether.runtime.store.rows import POSTGRES, Dialect
from tether.runtime.store.sealing import NEWEST_RUN, Sealer, refuse_sealed
from tether.runtime.store.validation import ValidRun
from tether.runtime.worker_role import WORKER_GROUP

__all__ = ["PostgresRunStore"]

_BUMP = "UPDATE tether_runs SET last_seq = last_seq + %s WHERE run_id = %s RETURNING last_seq"
_CANCEL_ENDED = """
UPDATE tether_runs
   SET status = 'cancelled', cancel_action = %(action)s, cancel_reason = %(reason)s,
       cancel_requested_at = now(), ended_at = now(), updated_at = now(),
       last_seq = last_seq + 1
 WHERE run_id = %(run)s
RETURNING *"""
_CANCEL_RUNNING = """
UPDATE tether_runs
   SET cancel_action = %(action)s, cancel_reason = %(reason)s, cancel_requested_at = now(),
       updated_at = now(), last_seq = last_seq + 1
 WHERE run_id = %(run)s
RETURNING *"""
_FREE_THREAD = """
UPDATE tether_threads
   SET status = CASE WHEN EXISTS (SELECT 1 FROM tether_runs r WHERE r.thread_id = %(thread)s
                                     AND r.status IN ('pending', 'running'))
                     THEN 'busy' ELSE 'idle' END,
       updated_at = now()
 WHERE thread_id = %(thread)s"""
_INSERT_RUN = """
INSERT INTO tether_runs (run_id, tenant_id, thread_id, assistant_id, graph_id, status,
    multitask_strategy, kwargs, input, input_kind, metadata, max_attempts, available_at,
    deadline_at, step_timeout_s, last_seq)
VALUES (%(run)s, %(tenant)s, %(thread)s, %(assistant)s, %(graph)s, 'pending', %(strategy)s,
    %(kwargs)s::jsonb, %(input)s, %(input_kind)s, %(metadata)s::jsonb, %(max_attempts)s,
    now() + make_interval(secs => %(after)s), %(deadline)s, %(step_timeout)s, 1)
RETURNING *"""  # last_seq 1: its run.created event, inserted next
_RESUME = """
UPDATE tether_runs
   SET status = 'pending', input_kind = 'command', input = %(input)s,
       resumes = resumes + 1, attempt = 0, available_at = now(), waiting_on = '[]',
       cancel_action = NULL, cancel_reason = NULL, cancel_requested_at = NULL,
       updated_at = now()
 WHERE run_id = %(run)s AND status = 'interrupted'
RETURNING *"""


# A role with the privileges of tether workers grant's group (as its policies
# see it: USAGE, not a membership without INHERIT such as a CREATEROLE
# creator's), and not one that bypasses row-level security.
_SCOPED_ROLE = """SELECT EXISTS (SELECT 1 FROM pg_roles g WHERE g.rolname = %s
                          AND pg_has_role(current_user, g.oid, 'USAGE'))
       AND NOT (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)"""


async def _append(cur: Cursor, run_id: str, events: Sequence[NewEvent], sealer: Sealer) -> int:
    """Append control-plane events (no fence); the caller holds the run row's lock."""
    await cur.execute(_BUMP, (len(events), run_id))
    row = await cur.fetchone()
    assert row is not None
    last = int(row["last_seq"])
    await insert_events(cur, run_id, last - len(events), events, sealer)
    return last


async def _one(cur: Cursor) -> DictRow:
    row = await cur.fetchone()
    assert row is not None
    return row


class PostgresRunStore(PostgresEditHooks, PostgresCronHooks, CronPlane, RetentionPlane):
    """The run store on PostgreSQL. Open it with ``open_run_store("postgresql://…")``."""

    dialect: Literal["postgres"] = "postgres"
    mark = "%s"

    def __init__(self, pool: AsyncConnectionPool[Any], *, scoped: bool = False) -> None:
        self._pool = pool
        self._rows = POSTGRES
        self.scoped = scoped
        self._leases = {}

    @property
    def rows(self) -> Dialect:
        return self._rows

    def seal_with(self, keys: KeyRing | None) -> None:
        self._rows = POSTGRES.sealed_by(Sealer(keys))

    @classmethod
    async def open(
        cls, url: str, *, min_size: int = 1, max_size: int = 10, connect_timeout: float = 5.0
    ) -> PostgresRunStore:
        conninfo = url.replace("postgres://", "postgresql://", 1)
        try:  # a direct connection first fails fast with the server's reason
            probe = await psycopg.AsyncConnection.connect(
                conninfo, connect_timeout=max(1, math.ceil(connect_timeout))
            )
            try:
                cur = await probe.execute(_SCOPED_ROLE, (WORKER_GROUP,))
                row = await cur.fetchone()
                scoped = bool(row and row[0])
            finally:
                await probe.close()
        except psycopg.OperationalError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise BackendUnavailableError(
                f"cannot reach the run store's PostgreSQL ({redact(url)}): {first}"
            ) from exc
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            # A process stopped inside a transaction (SIGSTOP, a debugger, a VM pause)
            # would hold its run and thread rows, which claims skip, for ever.
            configure=abort_idle_transactions,
        )
        await pool.open(wait=True, timeout=connect_timeout)
        return cls(pool, scoped=scoped)

    async def aclose(self) -> None:
        await self._pool.close()

    async def setup(self) -> None:
        async with self._pool.connection() as conn:
            await migrations.apply_postgres(conn)

    async def schema_version(self) -> int:
        async with self._pool.connection() as conn:
            return await migrations.postgres_version(conn)

    async def refuse_sealed(self, where: str) -> None:
        async with self._pool.connection() as conn:
            row = await (await conn.execute(NEWEST_RUN)).fetchone()
        refuse_sealed(row, None if row is None else row["kwargs"], where)

    # -- control-plane hooks (see plane.ControlPlane) ------------------------------------

    async def _put_assistant(self, a: NewAssistant, tenant: str) -> tuple[Assistant, bool]:
        async with self._tx() as cur:
            await cur.execute(
                """INSERT INTO tether_assistants (assistant_id, tenant_id, graph_id, name,
                       description, config, context, metadata)
                   VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb)
                   ON CONFLICT (assistant_id) DO NOTHING RETURNING *""",
                (a.assistant_id, tenant, a.graph_id, a.name, a.description, *a.json),
            )
            row = await cur.fetchone()
            if row is not None:
                await cur.execute(
                    """INSERT INTO tether_assistant_versions (assistant_id, version, graph_id,
                           name, description, config, context, metadata)
                       VALUES (%s, 1, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb)""",
                    (a.assistant_id, a.graph_id, a.name, a.description, *a.json),
                )
                return self.rows.assistant(row), True
            await cur.execute(
                "SELECT * FROM tether_assistants WHERE assistant_id = %s", (a.assistant_id,)
            )
            return self.rows.assistant(await _one(cur)), False

    async def _assistant_candidates(
        self, assistant_id: str, tenant: str
    ) -> builtins.list[Assistant]:
        rows = await self._select(
            """SELECT * FROM tether_assistants
                WHERE (assistant_id = %s AND tenant_id = %s)
                   OR (assistant_id IN (%s, %s) AND tenant_id = '')""",
            (assistant_id, tenant, assistant_id, system_assistant_id(assistant_id)),
        )
        return [self.rows.assistant(row) for row in rows]

    async def _put_thread(self, thread_id: str, tenant: str, meta: str) -> tuple[Thread, bool]:
        async with self._tx() as cur:
            await cur.execute(
                """INSERT INTO tether_threads (thread_id, tenant_id, metadata)
                   VALUES (%s, %s, %s::jsonb) ON CONFLICT (thread_id) DO NOTHING RETURNING *""",
                (thread_id, tenant, meta),
            )
            row = await cur.fetchone()
            if row is not None:
                return self.rows.thread(row), True
            await cur.execute("SELECT * FROM tether_threads WHERE thread_id = %s", (thread_id,))
            return self.rows.thread(await _one(cur)), False

    async def _find_thread(self, thread_id: str, tenant: str) -> Thread | None:
        row = await self._read_one(
            "SELECT * FROM tether_threads WHERE thread_id = %s AND tenant_id = %s",
            (thread_id, tenant),
        )
        return None if row is None else self.rows.thread(row)

    async def _list_threads(
        self,
        tenant: str,
        status: ThreadStatus | None,
        metadata: Mapping[str, Any],
        limit: int,
        offset: int,
    ) -> builtins.list[Thread]:
        clause, params = control.where([("tenant_id", tenant), ("status", status)], "%s")
        sql = f"SELECT * FROM tether_threads WHERE {clause}"
        if metadata:
            sql += " AND metadata @> %s::jsonb"
            params.append(dumps(dict(metadata)))
        sql += " ORDER BY updated_at DESC, thread_id LIMIT %s OFFSET %s"
        return [self.rows.thread(r) for r in await self._read(sql, [*params, limit, offset])]

    async def _delete_thread(self, thread_id: str, tenant: str) -> bool:
        async with self._tx() as cur:
            await cur.execute(
                "DELETE FROM tether_threads WHERE thread_id = %s AND tenant_id = %s RETURNING 1",
                (thread_id, tenant),
            )
            return await cur.fetchone() is not None

    async def _create_run(self, v: ValidRun, assistant: Assistant, tenant: str) -> Created:
        async with self._queued_tx() as cur:
            return await self._create_run_in(cur, v, assistant, tenant)

    async def _create_run_in(
        self, cur: Cursor, v: ValidRun, assistant: Assistant, tenant: str
    ) -> Created:
        """§3.3.7 inside the caller's transaction (a cron's fire is one too)."""
        thread_id = v.thread_id or new_id()
        if v.create_thread:
            meta = control.thread_marks(assistant)
            await cur.execute(
                """INSERT INTO tether_threads (thread_id, tenant_id, metadata, temporary,
                       status) VALUES (%s, %s, %s::jsonb, %s, 'busy')
                   ON CONFLICT (thread_id) DO NOTHING""",
                (thread_id, tenant, dumps(meta), v.temporary),
            )
        await cur.execute(
            "SELECT tenant_id FROM tether_threads WHERE thread_id = %s FOR UPDATE",
            (thread_id,),
        )
        thread = await cur.fetchone()
        if thread is None or thread["tenant_id"] != tenant:
            raise ThreadNotFoundError(control.no_thread(thread_id))
        await cur.execute(
            """SELECT run_id, status, (metadata -> %s) IS NOT NULL AS tethers
                 FROM tether_runs WHERE thread_id = %s
                  AND status IN ('pending', 'running') ORDER BY seq FOR UPDATE""",
            (TETHER_RUN_MARK, thread_id),
        )
        inflight = [
            InflightRun(r["run_id"], r["status"], r["tethers"]) for r in await cur.fetchall()
        ]
        decision = plan(v.strategy, inflight)
        if decision.reject:
            raise ThreadBusyError(BUSY_MESSAGE)
        closed = await self._continue_interrupted(cur, thread_id, v.run_id)
        continued = max(closed, key=lambda r: r.seq) if closed else None
        v = control.with_resumed(v, closed)
        try:  # in a queued transaction, the insert's error comes at its fetch
            await cur.execute(
                _INSERT_RUN, control.run_params(v, assistant, tenant, thread_id, self.rows.sealer)
            )
            # The run as created, and as returned: nothing below changes its row.
            created = self.rows.run(await _one(cur))
        except psycopg.errors.UniqueViolation as exc:
            raise AlreadyExistsError(f"run {v.run_id} already exists") from exc
        await insert_events(
            cur, v.run_id, 0, [control.created_event(assistant, v)], self.rows.sealer
        )
        reason = superseded_reason(v.run_id, v.strategy)
        superseded = [
            await self._cancel_in(cur, run_id, action, reason) for run_id, action in decision.cancel
        ]
        # As LangGraph's server: a thread not busy takes the graph and assistant of its run.
        await cur.execute(
            """UPDATE tether_threads SET updated_at = now(), status = 'busy',
                      metadata = CASE WHEN status = 'busy' THEN metadata
                                      ELSE metadata || %s::jsonb END
                WHERE thread_id = %s""",
            (dumps(control.thread_marks(assistant)), thread_id),
        )
        await cur.execute("SELECT pg_notify('tether_runs', %s)", (assistant.graph_id,))
        return Created(created, tuple(superseded), continued)

    async def _continue_interrupted(self, cur: Cursor, thread_id: str, new: str) -> list[Run]:
        await cur.execute(
            """UPDATE tether_runs
                  SET status = 'success', ended_at = now(), updated_at = now(),
                      ended_reason = %s, input = NULL, input_kind = 'none'
                WHERE thread_id = %s AND status = 'interrupted' RETURNING run_id""",
            (control.continued_reason(new), thread_id),
        )
        closed: list[Run] = []
        for row in await cur.fetchall():
            await _append(cur, row["run_id"], [control.continued_event(new)], self.rows.sealer)
            closed.append(await self._locked_run(cur, row["run_id"]))
        return closed

    async def _locked_run(self, cur: Cursor, run_id: str) -> Run:
        await cur.execute("SELECT * FROM tether_runs WHERE run_id = %s FOR UPDATE", (run_id,))
        return self.rows.run(await _one(cur))

    async def _cancel_in(
        self, cur: Cursor, run_id: str, action: CancelAction, reason: str | None
    ) -> Run:
        """Cancel a run whose thread row this transaction holds (§3.7)."""
        run = await self._locked_run(cur, run_id)
        control.check_cancellable(run)
        params = {"run": run_id, "action": action, "reason": reason}
        await cur.execute(_CANCEL_RUNNING if run.status == "running" else _CANCEL_ENDED, params)
        row = await _one(cur)
        event = control.cancel_event(run.status, action, reason)
        await insert_events(cur, run_id, int(row["last_seq"]) - 1, [event], self.rows.sealer)
        if run.status == "running":  # it ends when its worker stops it
            await cur.execute(
                "SELECT pg_notify('tether_control', %s), pg_notify('tether_events', %s)",
                (run_id, run_id),
            )
        else:
            await cur.execute(_FREE_THREAD, {"thread": run.thread_id})
            await cur.execute(ENDED, {"run": run_id, "thread": run.thread_id})
        return self.rows.run(row)

    async def _lock_thread_of(self, cur: Cursor, run_id: str, tenant: str) -> str:
        """Lock the run's thread row (thread first, then run) and return its id."""
        await cur.execute(
            "SELECT thread_id FROM tether_runs WHERE run_id = %s AND tenant_id = %s",
            (run_id, tenant),
        )
        row = await cur.fetchone()
        if row is None:
            raise RunNotFoundError(control.no_run(run_id))
        await cur.execute(
            "SELECT 1 FROM tether_threads WHERE thread_id = %s FOR UPDATE", (row["thread_id"],)
        )
        return str(row["thread_id"])

    async def _find_run(self, run_id: str, tenant: str) -> Run | None:
        row = await self._read_one(
            "SELECT * FROM tether_runs WHERE run_id = %s AND tenant_id = %s", (run_id, tenant)
        )
        return None if row is None else self.rows.run(row)

    async def _list_runs(
        self,
        tenant: str,
        thread_id: str | None,
        status: RunStatus | None,
        limit: int,
        offset: int,
    ) -> builtins.list[Run]:
        filters = [("tenant_id", tenant), ("thread_id", thread_id), ("status", status)]
        clause, params = control.where(filters, "%s")
        sql = f"SELECT * FROM tether_runs WHERE {clause} ORDER BY created_at DESC, seq DESC"
        rows = await self._read(sql + " LIMIT %s OFFSET %s", [*params, limit, offset])
        return [self.rows.run(r) for r in rows]

    async def _cancel_run(
        self, run_id: str, tenant: str, action: CancelAction, reason: str | None
    ) -> Run:
        async with self._tx() as cur:
            await self._lock_thread_of(cur, run_id, tenant)
            return await self._cancel_in(cur, run_id, action, reason)

    async def _resume_run(
        self, run_id: str, tenant: str, payload: str, events: Sequence[NewEvent]
    ) -> Run:
        async with self._tx() as cur:
            thread_id = await self._lock_thread_of(cur, run_id, tenant)
            await cur.execute(_RESUME, {"run": run_id, "input": payload})
            row = await cur.fetchone()
            if row is None:
                current = await self._locked_run(cur, run_id)
                raise RunNotActiveError(control.not_interrupted(current))
            await _append(
                cur, run_id, [*events, control.resumed_event(int(row["resumes"]))], self.rows.sealer
            )
            await cur.execute(
                "UPDATE tether_threads SET status = 'busy', updated_at = now() "
                "WHERE thread_id = %s",
                (thread_id,),
            )
            await cur.execute(
                "SELECT pg_notify('tether_runs', %s), pg_notify('tether_events', %s)",
                (row["graph_id"], run_id),
            )
            return await self._locked_run(cur, run_id)

    async def _add_events(self, run_id: str, tenant: str, events: Sequence[NewEvent]) -> int:
        async with self._tx() as cur:
            await cur.execute(
                "SELECT 1 FROM tether_runs WHERE run_id = %s AND tenant_id = %s FOR UPDATE",
                (run_id, tenant),
            )
            if await cur.fetchone() is None:
                raise RunNotFoundError(control.no_run(run_id))
            last = await _append(cur, run_id, events, self.rows.sealer)
            await cur.execute("SELECT pg_notify('tether_events', %s)", (run_id,))
            return last

    async def _events(
        self, run_id: str, tenant: str, after: int, limit: int, kinds: Sequence[str] | None
    ) -> builtins.list[RunEvent] | None:
        sql = """SELECT e.* FROM tether_run_events e JOIN tether_runs r ON r.run_id = e.run_id
                  WHERE e.run_id = %s AND r.tenant_id = %s AND e.seq > %s"""
        params: list[Any] = [run_id, tenant, after]
        if kinds is not None:
            sql += " AND e.kind = ANY(%s)"
            params.append(list(kinds))
        rows = await self._read(sql + " ORDER BY e.seq LIMIT %s", [*params, limit])
        if not rows and await self._find_run(run_id, tenant) is None:
            return None
        return [self.rows.event(r) for r in rows]

    # -- reads ------------------------------------------------------------------------------

    async def _read(self, sql: str, params: Sequence[Any]) -> builtins.list[DictRow]:
        async with self._conn() as conn:
            cur = await conn.execute(sql, params)
            rows: builtins.list[DictRow] = await cur.fetchall()
            return rows

    async def _read_one(self, sql: str, params: Sequence[Any]) -> DictRow | None:
        rows = await self._read(sql, params)
        return rows[0] if rows else None

    async def _execute(self, sql: str, params: Sequence[Any]) -> int:
        """One write statement in its own transaction; the rows it changed."""
        async with self._tx() as cur:
            await cur.execute(sql, params)
            return cur.rowcount

    async def _execute_all(self, statements: Sequence[Statement]) -> builtins.list[int]:
        """Write statements in one transaction; the rows each changed."""
        counts = []
        async with self._tx() as cur:
            for sql, params in statements:
                await cur.execute(sql, params)
                counts.append(cur.rowcount)
        return counts
