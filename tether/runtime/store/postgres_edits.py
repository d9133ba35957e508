"""The PostgreSQL run store's edits: thread metadata and state, copies, run deletion,
assistant versions, temporary threads (see :class:`~.edits.EditPlane`).

Each hook is one transaction; rows are locked thread first, then run, as in
every other transaction of the store.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import DictRow

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
from tether.runtime.store.postgres_worker import Cursor, PostgresWorkerPlane

__all__ = ["PostgresEditHooks"]


async def _one(cur: Cursor) -> DictRow:
    row = await cur.fetchone()
    assert row is not None
    return row


class PostgresEditHooks(PostgresWorkerPlane):
    """The edit hooks of ``PostgresRunStore``."""

    async def _select(self, sql: str, params: Sequence[Any]) -> builtins.list[DictRow]:
        async with self._conn() as conn:
            cur = await conn.execute(sql, params)
            rows: builtins.list[DictRow] = await cur.fetchall()
            return rows

    async def _merge_thread_metadata(
        self, thread_id: str, tenant: str, patch: str
    ) -> Thread | None:
        row = await self._write_one(
            """UPDATE tether_threads SET metadata = metadata || %s::jsonb, updated_at = now()
                WHERE thread_id = %s AND tenant_id = %s RETURNING *""",
            (patch, thread_id, tenant),
        )
        return None if row is None else self.rows.thread(row)

    async def _record_state(self, thread_id: str, tenant: str, state: StateRecord) -> Thread | None:
        async with self._tx() as cur:
            await cur.execute(
                "SELECT 1 FROM tether_threads WHERE thread_id = %s AND tenant_id = %s FOR UPDATE",
                (thread_id, tenant),
            )
            if await cur.fetchone() is None:
                return None
            await cur.execute(
                "SELECT run_id FROM tether_runs WHERE thread_id = %s "
                "AND status IN ('pending', 'running') ORDER BY seq LIMIT 1",
                (thread_id,),
            )
            active = await cur.fetchone()
            check_thread_free(thread_id, None if active is None else active["run_id"])
            await cur.execute(
                """UPDATE tether_threads
                      SET status = %s, state_values = %s, interrupts = %s::jsonb, error = NULL,
                          updated_at = now(), state_updated_at = now()
                    WHERE thread_id = %s RETURNING *""",
                (state.status, state.values, state.interrupts, thread_id),
            )
            return self.rows.thread(await _one(cur))

    async def _insert_thread_copy(
        self, source: Thread, thread_id: str, tenant: str, meta: str, state: StateRecord | None
    ) -> Thread:
        try:
            row = await self._write_one(
                """INSERT INTO tether_threads (thread_id, tenant_id, metadata, config, status,
                       state_values, interrupts)
                   VALUES (%s, %s, %s::jsonb, %s::jsonb, %s, %s, %s::jsonb) RETURNING *""",
                (
                    thread_id,
                    tenant,
                    meta,
                    dumps(dict(source.config)),
                    "idle" if state is None else state.status,
                    None if state is None else state.values,
                    "{}" if state is None else state.interrupts,
                ),
            )
        except psycopg.errors.UniqueViolation as exc:
            raise AlreadyExistsError(f"thread {thread_id!r} already exists") from exc
        assert row is not None
        return self.rows.thread(row)

    async def _set_ending(
        self, run_id: str, tenant: str, error: str | None, reason: str | None
    ) -> Run | None:
        row = await self._write_one(
            """UPDATE tether_runs SET error = %s, ended_reason = %s, updated_at = now()
                WHERE run_id = %s AND tenant_id = %s
                  AND status IN ('success', 'error', 'cancelled', 'timeout')
            RETURNING *""",
            (error, reason, run_id, tenant),
        )
        return None if row is None else self.rows.run(row)

    async def _delete_run(self, run_id: str, tenant: str) -> Run | None:
        async with self._tx() as cur:
            await cur.execute(
                "SELECT thread_id FROM tether_runs WHERE run_id = %s AND tenant_id = %s",
                (run_id, tenant),
            )
            found = await cur.fetchone()
            if found is None:
                return None
            await cur.execute(  # thread first, then run, as every transaction locks them
                "SELECT 1 FROM tether_threads WHERE thread_id = %s FOR UPDATE",
                (found["thread_id"],),
            )
            await cur.execute("SELECT * FROM tether_runs WHERE run_id = %s FOR UPDATE", (run_id,))
            run = self.rows.run(await _one(cur))
            check_run_deletable(run)
            await cur.execute("DELETE FROM tether_runs WHERE run_id = %s", (run_id,))
            return run

    async def _new_assistant_version(self, assistant_id: str, change: AssistantChange) -> Assistant:
        fields = (
            change.graph_id,
            change.name,
            change.description,
            change.config,
            change.context,
            change.metadata,
        )
        async with self._tx() as cur:
            await cur.execute(
                "SELECT version FROM tether_assistants WHERE assistant_id = %s FOR UPDATE",
                (assistant_id,),
            )
            await cur.execute(
                """INSERT INTO tether_assistant_versions (graph_id, name, description, config,
                       context, metadata, assistant_id, version)
                   SELECT %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s,
                          COALESCE(MAX(version), 0) + 1
                     FROM tether_assistant_versions WHERE assistant_id = %s
                   RETURNING version""",
                (*fields, assistant_id, assistant_id),
            )
            version = (await _one(cur))["version"]
            await cur.execute(
                """UPDATE tether_assistants
                      SET graph_id = %s, name = %s, description = %s, config = %s::jsonb,
                          context = %s::jsonb, metadata = %s::jsonb, version = %s,
                          updated_at = now()
                    WHERE assistant_id = %s RETURNING *""",
                (*fields, version, assistant_id),
            )
            return self.rows.assistant(await _one(cur))

    async def _assistant_versions(self, assistant_id: str) -> builtins.list[Assistant]:
        rows = await self._select(
            """SELECT v.*, a.tenant_id, v.created_at AS updated_at
                 FROM tether_assistant_versions v
                 JOIN tether_assistants a ON a.assistant_id = v.assistant_id
                WHERE v.assistant_id = %s ORDER BY v.version DESC""",
            (assistant_id,),
        )
        return [self.rows.assistant(r) for r in rows]

    async def _set_assistant_version(self, assistant_id: str, version: int) -> Assistant | None:
        row = await self._write_one(
            """UPDATE tether_assistants a
                  SET graph_id = v.graph_id, name = v.name, description = v.description,
                      config = v.config, context = v.context, metadata = v.metadata,
                      version = v.version, updated_at = now()
                 FROM tether_assistant_versions v
                WHERE a.assistant_id = %s AND v.assistant_id = a.assistant_id
                  AND v.version = %s
               RETURNING a.*""",
            (assistant_id, version),
        )
        return None if row is None else self.rows.assistant(row)

    async def _delete_assistant(self, assistant_id: str) -> bool:
        row = await self._write_one(
            "DELETE FROM tether_assistants WHERE assistant_id = %s RETURNING 1", (assistant_id,)
        )
        return row is not None

    async def _visible_assistants(self, tenant: str) -> builtins.list[Assistant]:
        rows = await self._select(
            "SELECT * FROM tether_assistants WHERE tenant_id IN (%s, '') "
            "ORDER BY created_at, assistant_id",
            (tenant,),
        )
        return [self.rows.assistant(r) for r in rows]

    async def _ended_temporary_threads(
        self, before: datetime, limit: int
    ) -> builtins.list[tuple[str, str]]:
        rows = await self._select(ended_temporary("%s"), (before, limit))
        return [(r["thread_id"], r["tenant_id"]) for r in rows]

    async def _write_one(self, sql: str, params: Sequence[Any]) -> DictRow | None:
        """One write statement in its own transaction; the first row it returned."""
        async with self._tx() as cur:
            await cur.execute(sql, params)
            return await cur.fetchone()
