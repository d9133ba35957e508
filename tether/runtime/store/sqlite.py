"""The SQLite run store: connection, migrations and the control plane (§3.2.3, §3.3.7, §3.7).

One host, several processes: every write transaction starts with ``BEGIN
IMMEDIATE``, which takes SQLite's single write lock before reading, so two
processes never both decide on the same rows; ``busy_timeout`` makes the
second wait instead of failing. The connection is WAL, foreign keys on,
autocommit (``isolation_level=None``), and used from one thread of its own.
"""

from __future__ import annotations

import asyncio
import builtins
import sqlite3
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from tether.checkpointing import KeyRing
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
from tether.runtime.store.retention import RetentionPlane, Statement
from tether.runtime.store.rows import SQLITE, Dialect
from tether.runtime.store.sealing import NEWEST_RUN, Sealer, refuse_sealed
from tether.runtime.store.sqlite_crons import SqliteCronHooks
from tether.runtime.store.sqlite_edits import SqliteEditHooks
from tether.runtime.store.sqlite_worker import RunDB, insert_events
from tether.runtime.store.validation import ValidRun

__all__ = ["BUSY_TIMEOUT_MS", "SqliteRunStore", "connect"]

BUSY_TIMEOUT_MS = 5000
DB = RunDB
_INSERT_RUN = """
INSERT INTO tether_runs (run_id, seq, tenant_id, thread_id, assistant_id, graph_id, status,
    multitask_strategy, kwargs, input, input_kind, metadata, max_attempts, available_at,
    deadline_at, step_timeout_s, last_seq, created_at, updated_at)
VALUES (:run, (SELECT COALESCE(MAX(seq), 0) + 1 FROM tether_runs), :tenant, :thread,
    :assistant, :graph, 'pending', :strategy, :kwargs, :input, :input_kind, :metadata,
    :max_attempts, :now + :after, :deadline, :step_timeout, 0, :now, :now)"""
_FREE_THREAD = """
UPDATE tether_threads
   SET status = CASE WHEN EXISTS (SELECT 1 FROM tether_runs r WHERE r.thread_id = :thread
                                     AND r.status IN ('pending', 'running'))
                     THEN 'busy' ELSE 'idle' END,
       updated_at = :now
 WHERE thread_id = :thread"""


def connect(path: str) -> DB:
    """A runtime connection: busy timeout, WAL, foreign keys, autocommit."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, factory=RunDB)
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA foreign_keys = ON")
    return db


def _append(db: DB, run_id: str, events: Sequence[NewEvent], now: float) -> int:
    """Append control-plane events (no fence) inside the caller's write transaction."""
    row = db.execute(
        "UPDATE tether_runs SET last_seq = last_seq + ? WHERE run_id = ? RETURNING last_seq",
        (len(events), run_id),
    ).fetchone()
    insert_events(db, run_id, row[0] - len(events), events, now)
    return int(row[0])


def _run(db: DB, run_id: str) -> Run:
    return db.rows.run(
        db.execute("SELECT * FROM tether_runs WHERE run_id = ?", (run_id,)).fetchone()
    )


def _tenant_run(db: DB, run_id: str, tenant: str) -> Run:
    row = db.execute(
        "SELECT * FROM tether_runs WHERE run_id = ? AND tenant_id = ?", (run_id, tenant)
    ).fetchone()
    if row is None:
        raise RunNotFoundError(control.no_run(run_id))
    return db.rows.run(row)


def _cancel_in(db: DB, now: float, run_id: str, action: CancelAction, reason: str | None) -> Run:
    """Cancel a run inside the caller's write transaction (§3.7)."""
    run = _run(db, run_id)
    control.check_cancellable(run)
    if run.status == "running":
        db.execute(
            "UPDATE tether_runs SET cancel_action = ?, cancel_reason = ?, "
            "cancel_requested_at = ?, updated_at = ? WHERE run_id = ?",
            (action, reason, now, now, run_id),
        )
    else:
        db.execute(
            "UPDATE tether_runs SET status = 'cancelled', cancel_action = ?, cancel_reason = ?, "
            "cancel_requested_at = ?, ended_at = ?, updated_at = ? WHERE run_id = ?",
            (action, reason, now, now, now, run_id),
        )
    _append(db, run_id, [control.cancel_event(run.status, action, reason)], now)
    if run.status != "running":
        db.execute(_FREE_THREAD, {"thread": run.thread_id, "now": now})
    return _run(db, run_id)


def _continue_interrupted(db: DB, now: float, thread_id: str, new: str) -> list[Run]:
    rows = db.execute(
        """UPDATE tether_runs SET status = 'success', ended_at = :now, updated_at = :now,
                  ended_reason = :reason, input = NULL, input_kind = 'none'
            WHERE thread_id = :thread AND status = 'interrupted' RETURNING run_id""",
        {"now": now, "reason": control.continued_reason(new), "thread": thread_id},
    ).fetchall()
    closed = []
    for row in rows:
        _append(db, row[0], [control.continued_event(new)], now)
        closed.append(_run(db, row[0]))
    return closed


def _create_run(db: DB, now: float, v: ValidRun, assistant: Assistant, tenant: str) -> Created:
    thread_id = v.thread_id or new_id()
    if v.create_thread:
        meta = dumps(control.thread_marks(assistant))
        db.execute(
            """INSERT INTO tether_threads (thread_id, tenant_id, metadata, temporary, status,
                   created_at, updated_at, state_updated_at)
               VALUES (?, ?, ?, ?, 'busy', ?, ?, ?) ON CONFLICT (thread_id) DO NOTHING""",
            (thread_id, tenant, meta, v.temporary, now, now, now),
        )
    owner = db.execute(
        "SELECT tenant_id, status, metadata FROM tether_threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    if owner is None or owner[0] != tenant:
        raise ThreadNotFoundError(control.no_thread(thread_id))
    # As LangGraph's server: a thread not busy takes the graph and assistant of its run.
    metadata = owner[2]
    if owner[1] != "busy":
        metadata = dumps({**db.rows.json(owner[2]), **control.thread_marks(assistant)})
    inflight = [
        InflightRun(r[0], r[1], bool(r[2]))
        for r in db.execute(
            "SELECT run_id, status, json_extract(metadata, ?) IS NOT NULL FROM tether_runs "
            "WHERE thread_id = ? AND status IN ('pending', 'running') ORDER BY seq",
            (f"$.{TETHER_RUN_MARK}", thread_id),
        )
    ]
    decision = plan(v.strategy, inflight)
    if decision.reject:
        raise ThreadBusyError(BUSY_MESSAGE)
    closed = _continue_interrupted(db, now, thread_id, v.run_id)
    continued = max(closed, key=lambda r: r.seq) if closed else None
    v = control.with_resumed(v, closed)
    params = control.run_params(v, assistant, tenant, thread_id, db.rows.sealer)
    params.update(now=now, deadline=v.deadline_at and v.deadline_at.timestamp())
    try:
        db.execute(_INSERT_RUN, params)
    except sqlite3.IntegrityError as exc:
        raise AlreadyExistsError(f"run {v.run_id} already exists") from exc
    _append(db, v.run_id, [control.created_event(assistant, v)], now)
    reason = superseded_reason(v.run_id, v.strategy)
    superseded = tuple(_cancel_in(db, now, r, action, reason) for r, action in decision.cancel)
    db.execute(
        "UPDATE tether_threads SET status = 'busy', updated_at = ?, metadata = ? "
        "WHERE thread_id = ?",
        (now, metadata, thread_id),
    )
    return Created(_run(db, v.run_id), superseded, continued)


def _resume(
    db: DB, now: float, run_id: str, tenant: str, *, payload: str, events: Sequence[NewEvent]
) -> Run:
    run = _tenant_run(db, run_id, tenant)
    if run.status != "interrupted":
        raise RunNotActiveError(control.not_interrupted(run))
    db.execute(
        """UPDATE tether_runs
              SET status = 'pending', input_kind = 'command', input = :input,
                  resumes = resumes + 1, attempt = 0, available_at = :now, waiting_on = '[]',
                  cancel_action = NULL, cancel_reason = NULL, cancel_requested_at = NULL,
                  updated_at = :now
            WHERE run_id = :run""",
        {"input": payload, "now": now, "run": run_id},
    )
    _append(db, run_id, [*events, control.resumed_event(run.resumes + 1)], now)
    db.execute(
        "UPDATE tether_threads SET status = 'busy', updated_at = ? WHERE thread_id = ?",
        (now, run.thread_id),
    )
    return _run(db, run_id)


class SqliteRunStore(SqliteEditHooks, SqliteCronHooks, CronPlane, RetentionPlane):
    """The run store on SQLite. Open it with ``open_run_store("sqlite:///path")``."""

    dialect: Literal["sqlite"] = "sqlite"
    mark = "?"
    _create_run_tx = staticmethod(_create_run)

    def __init__(self, db: DB, executor: ThreadPoolExecutor) -> None:
        self._db = db
        self._executor = executor

    @classmethod
    async def open(cls, path: str) -> SqliteRunStore:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tether-runstore")
        try:
            db = await asyncio.get_running_loop().run_in_executor(executor, connect, path)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(db, executor)

    @property
    def rows(self) -> Dialect:
        return self._db.rows

    def seal_with(self, keys: KeyRing | None) -> None:
        self._db.rows = SQLITE.sealed_by(Sealer(keys))

    async def aclose(self) -> None:
        await self._run(lambda db: db.close())
        self._executor.shutdown(wait=True)

    async def setup(self) -> None:
        await self._run(migrations.apply_sqlite)

    async def schema_version(self) -> int:
        return await self._run(migrations.sqlite_version)

    async def refuse_sealed(self, where: str) -> None:
        row = await self._run(lambda db: db.execute(NEWEST_RUN).fetchone())
        refuse_sealed(row, None if row is None else SQLITE.json(row["kwargs"]), where)

    # -- control-plane hooks (see plane.ControlPlane) ------------------------------------

    async def _put_assistant(self, a: NewAssistant, tenant: str) -> tuple[Assistant, bool]:
        def put(db: DB, now: float) -> tuple[Assistant, bool]:
            values = (a.assistant_id, a.graph_id, a.name, a.description, *a.json)
            inserted = db.execute(
                """INSERT INTO tether_assistants (assistant_id, graph_id, name, description,
                       config, context, metadata, tenant_id, created_at, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (assistant_id) DO NOTHING""",
                (*values, tenant, now, now),
            ).rowcount
            if inserted:
                db.execute(
                    """INSERT INTO tether_assistant_versions (assistant_id, graph_id, name,
                           description, config, context, metadata, version, created_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)""",
                    (*values, now),
                )
            row = db.execute(
                "SELECT * FROM tether_assistants WHERE assistant_id = ?", (a.assistant_id,)
            ).fetchone()
            return self._db.rows.assistant(row), bool(inserted)

        return await self._write(put)

    async def _assistant_candidates(
        self, assistant_id: str, tenant: str
    ) -> builtins.list[Assistant]:
        rows = await self._select(
            """SELECT * FROM tether_assistants
                WHERE (assistant_id = ? AND tenant_id = ?)
                   OR (assistant_id IN (?, ?) AND tenant_id = '')""",
            (assistant_id, tenant, assistant_id, system_assistant_id(assistant_id)),
        )
        return [self._db.rows.assistant(row) for row in rows]

    async def _put_thread(self, thread_id: str, tenant: str, meta: str) -> tuple[Thread, bool]:
        def put(db: DB, now: float) -> tuple[Thread, bool]:
            inserted = db.execute(
                """INSERT INTO tether_threads (thread_id, tenant_id, metadata, created_at,
                       updated_at, state_updated_at) VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT (thread_id) DO NOTHING""",
                (thread_id, tenant, meta, now, now, now),
            ).rowcount
            row = db.execute(
                "SELECT * FROM tether_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            return self._db.rows.thread(row), bool(inserted)

        return await self._write(put)

    async def _find_thread(self, thread_id: str, tenant: str) -> Thread | None:
        row = await self._read_one(
            "SELECT * FROM tether_threads WHERE thread_id = ? AND tenant_id = ?",
            (thread_id, tenant),
        )
        return None if row is None else self._db.rows.thread(row)

    async def _list_threads(
        self,
        tenant: str,
        status: ThreadStatus | None,
        metadata: Mapping[str, Any],
        limit: int,
        offset: int,
    ) -> builtins.list[Thread]:
        clause, params = control.where([("tenant_id", tenant), ("status", status)], "?")
        sql = f"SELECT * FROM tether_threads WHERE {clause}"
        for key, value in metadata.items():  # top-level keys, equal as JSON
            sql += " AND json_extract(metadata, ?) IS json_extract(?, '$')"
            params += ['$."' + key.replace('"', '""') + '"', dumps(value)]
        sql += " ORDER BY updated_at DESC, thread_id LIMIT ? OFFSET ?"
        return [self._db.rows.thread(r) for r in await self._read(sql, [*params, limit, offset])]

    async def _delete_thread(self, thread_id: str, tenant: str) -> bool:
        deleted = await self._write(
            lambda db, _: (
                db.execute(
                    "DELETE FROM tether_threads WHERE thread_id = ? AND tenant_id = ?",
                    (thread_id, tenant),
                ).rowcount
            )
        )
        return bool(deleted)

    async def _create_run(self, v: ValidRun, assistant: Assistant, tenant: str) -> Created:
        return await self._write(lambda db, now: _create_run(db, now, v, assistant, tenant))

    async def _find_run(self, run_id: str, tenant: str) -> Run | None:
        row = await self._read_one(
            "SELECT * FROM tether_runs WHERE run_id = ? AND tenant_id = ?", (run_id, tenant)
        )
        return None if row is None else self._db.rows.run(row)

    async def _list_runs(
        self,
        tenant: str,
        thread_id: str | None,
        status: RunStatus | None,
        limit: int,
        offset: int,
    ) -> builtins.list[Run]:
        filters = [("tenant_id", tenant), ("thread_id", thread_id), ("status", status)]
        clause, params = control.where(filters, "?")
        sql = f"SELECT * FROM tether_runs WHERE {clause} ORDER BY created_at DESC, seq DESC"
        rows = await self._read(sql + " LIMIT ? OFFSET ?", [*params, limit, offset])
        return [self._db.rows.run(r) for r in rows]

    async def _cancel_run(
        self, run_id: str, tenant: str, action: CancelAction, reason: str | None
    ) -> Run:
        def cancel(db: DB, now: float) -> Run:
            _tenant_run(db, run_id, tenant)
            return _cancel_in(db, now, run_id, action, reason)

        return await self._write(cancel)

    async def _resume_run(
        self, run_id: str, tenant: str, payload: str, events: Sequence[NewEvent]
    ) -> Run:
        return await self._write(
            lambda db, now: _resume(db, now, run_id, tenant, payload=payload, events=events)
        )

    async def _add_events(self, run_id: str, tenant: str, events: Sequence[NewEvent]) -> int:
        def add(db: DB, now: float) -> int:
            _tenant_run(db, run_id, tenant)
            return _append(db, run_id, events, now)

        return await self._write(add)

    async def _events(
        self, run_id: str, tenant: str, after: int, limit: int, kinds: Sequence[str] | None
    ) -> builtins.list[RunEvent] | None:
        sql = """SELECT e.* FROM tether_run_events e JOIN tether_runs r ON r.run_id = e.run_id
                  WHERE e.run_id = ? AND r.tenant_id = ? AND e.seq > ?"""
        params: list[Any] = [run_id, tenant, after]
        if kinds is not None:
            sql += " AND e.kind IN (SELECT value FROM json_each(?))"
            params.append(dumps(list(kinds)))
        rows = await self._read(sql + " ORDER BY e.seq LIMIT ?", [*params, limit])
        if not rows and await self._find_run(run_id, tenant) is None:
            return None
        return [self._db.rows.event(r) for r in rows]

    # -- reads ------------------------------------------------------------------------------

    async def _read(self, sql: str, params: Sequence[Any]) -> builtins.list[sqlite3.Row]:
        return await self._run(lambda db: db.execute(sql, params).fetchall())

    async def _read_one(self, sql: str, params: Sequence[Any]) -> sqlite3.Row | None:
        rows = await self._read(sql, params)
        return rows[0] if rows else None

    async def _execute(self, sql: str, params: Sequence[Any]) -> int:
        """One write statement in its own transaction; the rows it changed."""
        return await self._write(lambda db, now: db.execute(sql, params).rowcount)

    async def _execute_all(self, statements: Sequence[Statement]) -> builtins.list[int]:
        """Write statements in one transaction; the rows each changed."""
        return await self._write(
            lambda db, now: [db.execute(sql, params).rowcount for sql, params in statements]
        )
