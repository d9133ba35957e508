"""The SQLite run store's edits: thread metadata and state, copies, run deletion,
assistant versions, temporary threads (see :class:`~.edits.EditPlane`).

Each hook is one ``BEGIN IMMEDIATE`` transaction on the store's connection, so a
read-modify-write (a metadata merge) sees no concurrent writer.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tether.runtime.errors import AlreadyExistsError
from tether.runtime.models import Assistant, Run, Thread
from tether.runtime.store.edits import (
    AssistantChange,
    StateRecord,
    check_run_deletable,
    check_thread_free,
    ended_temporary,
)
from tether.runtime.store.encoding import dumps
from tether.runtime.store.sqlite_worker import RunDB, SqliteWorkerPlane

__all__ = ["SqliteEditHooks"]

DB = RunDB


class SqliteEditHooks(SqliteWorkerPlane):
    """The edit hooks of ``SqliteRunStore``."""

    async def _select(self, sql: str, params: Sequence[Any]) -> builtins.list[sqlite3.Row]:
        return await self._run(lambda db: db.execute(sql, params).fetchall())

    async def _merge_thread_metadata(
        self, thread_id: str, tenant: str, patch: str
    ) -> Thread | None:
        def merge(db: DB, now: float) -> Thread | None:
            found = db.execute(
                "SELECT metadata FROM tether_threads WHERE thread_id = ? AND tenant_id = ?",
                (thread_id, tenant),
            ).fetchone()
            if found is None:
                return None
            merged = {**db.rows.json(found[0]), **db.rows.json(patch)}
            row = db.execute(
                "UPDATE tether_threads SET metadata = ?, updated_at = ? WHERE thread_id = ? "
                "RETURNING *",
                (dumps(merged), now, thread_id),
            ).fetchone()
            return db.rows.thread(row)

        return await self._write(merge)

    async def _record_state(self, thread_id: str, tenant: str, state: StateRecord) -> Thread | None:
        def record(db: DB, now: float) -> Thread | None:
            found = db.execute(
                "SELECT status FROM tether_threads WHERE thread_id = ? AND tenant_id = ?",
                (thread_id, tenant),
            ).fetchone()
            if found is None:
                return None
            active = db.execute(
                "SELECT run_id FROM tether_runs WHERE thread_id = ? "
                "AND status IN ('pending', 'running') ORDER BY seq LIMIT 1",
                (thread_id,),
            ).fetchone()
            check_thread_free(thread_id, None if active is None else active[0])
            row = db.execute(
                """UPDATE tether_threads
                      SET status = ?, state_values = ?, interrupts = ?, error = NULL,
                          updated_at = ?, state_updated_at = ?
                    WHERE thread_id = ? RETURNING *""",
                (state.status, state.values, state.interrupts, now, now, thread_id),
            ).fetchone()
            return db.rows.thread(row)

        return await self._write(record)

    async def _insert_thread_copy(
        self, source: Thread, thread_id: str, tenant: str, meta: str, state: StateRecord | None
    ) -> Thread:
        def insert(db: DB, now: float) -> Thread:
            try:
                db.execute(
                    """INSERT INTO tether_threads (thread_id, tenant_id, metadata, config,
                           status, state_values, interrupts, created_at, updated_at,
                           state_updated_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                    (
                        thread_id,
                        tenant,
                        meta,
                        dumps(dict(source.config)),
                        "idle" if state is None else state.status,
                        None if state is None else state.values,
                        "{}" if state is None else state.interrupts,
                        now,
                        now,
                        now,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise AlreadyExistsError(f"thread {thread_id!r} already exists") from exc
            row = db.execute(
                "SELECT * FROM tether_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            return db.rows.thread(row)

        return await self._write(insert)

    async def _set_ending(
        self, run_id: str, tenant: str, error: str | None, reason: str | None
    ) -> Run | None:
        def set_ending(db: DB, now: float) -> Run | None:
            row = db.execute(
                """UPDATE tether_runs SET error = ?, ended_reason = ?, updated_at = ?
                    WHERE run_id = ? AND tenant_id = ?
                      AND status IN ('success', 'error', 'cancelled', 'timeout')
                RETURNING *""",
                (error, reason, now, run_id, tenant),
            ).fetchone()
            return None if row is None else db.rows.run(row)

        return await self._write(set_ending)

    async def _delete_run(self, run_id: str, tenant: str) -> Run | None:
        def delete(db: DB, now: float) -> Run | None:
            row = db.execute(
                "SELECT * FROM tether_runs WHERE run_id = ? AND tenant_id = ?", (run_id, tenant)
            ).fetchone()
            if row is None:
                return None
            run = db.rows.run(row)
            check_run_deletable(run)
            db.execute("DELETE FROM tether_runs WHERE run_id = ?", (run_id,))
            return run

        return await self._write(delete)

    async def _new_assistant_version(self, assistant_id: str, change: AssistantChange) -> Assistant:
        def put(db: DB, now: float) -> Assistant:
            version = db.execute(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM tether_assistant_versions "
                "WHERE assistant_id = ?",
                (assistant_id,),
            ).fetchone()[0]
            fields = (
                change.graph_id,
                change.name,
                change.description,
                change.config,
                change.context,
                change.metadata,
            )
            db.execute(
                """INSERT INTO tether_assistant_versions (graph_id, name, description, config,
                       context, metadata, assistant_id, version, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (*fields, assistant_id, version, now),
            )
            row = db.execute(
                """UPDATE tether_assistants
                      SET graph_id = ?, name = ?, description = ?, config = ?, context = ?,
                          metadata = ?, version = ?, updated_at = ?
                    WHERE assistant_id = ? RETURNING *""",
                (*fields, version, now, assistant_id),
            ).fetchone()
            return db.rows.assistant(row)

        return await self._write(put)

    async def _assistant_versions(self, assistant_id: str) -> builtins.list[Assistant]:
        rows = await self._select(
            """SELECT v.*, a.tenant_id, v.created_at AS updated_at
                 FROM tether_assistant_versions v
                 JOIN tether_assistants a ON a.assistant_id = v.assistant_id
                WHERE v.assistant_id = ? ORDER BY v.version DESC""",
            (assistant_id,),
        )
        return [self._db.rows.assistant(r) for r in rows]

    async def _set_assistant_version(self, assistant_id: str, version: int) -> Assistant | None:
        def set_version(db: DB, now: float) -> Assistant | None:
            row = db.execute(
                """UPDATE tether_assistants
                      SET (graph_id, name, description, config, context, metadata, version) =
                          (SELECT graph_id, name, description, config, context, metadata, version
                             FROM tether_assistant_versions
                            WHERE assistant_id = :a AND version = :v),
                          updated_at = :now
                    WHERE assistant_id = :a AND EXISTS (
                          SELECT 1 FROM tether_assistant_versions
                           WHERE assistant_id = :a AND version = :v)
                   RETURNING *""",
                {"a": assistant_id, "v": version, "now": now},
            ).fetchone()
            return None if row is None else db.rows.assistant(row)

        return await self._write(set_version)

    async def _delete_assistant(self, assistant_id: str) -> bool:
        deleted = await self._write(
            lambda db, _: (
                db.execute(
                    "DELETE FROM tether_assistants WHERE assistant_id = ?", (assistant_id,)
                ).rowcount
            )
        )
        return bool(deleted)

    async def _visible_assistants(self, tenant: str) -> builtins.list[Assistant]:
        rows = await self._select(
            "SELECT * FROM tether_assistants WHERE tenant_id IN (?, '') "
            "ORDER BY created_at, assistant_id",
            (tenant,),
        )
        return [self._db.rows.assistant(r) for r in rows]

    async def _ended_temporary_threads(
        self, before: datetime, limit: int
    ) -> builtins.list[tuple[str, str]]:
        rows = await self._select(ended_temporary("?"), (before.timestamp(), limit))
        return [(r["thread_id"], r["tenant_id"]) for r in rows]
