"""What the retention sweep, erasure and the audit store need of the run store (schema v2).

Written once for both backends over three hooks (``_read``, ``_execute`` and
``_execute_all``, one transaction each) and the backend's placeholder. Every
method serves all tenants: retention and erasure are operators' jobs.

The rules that make a sweep safe to run beside live workers live here:

- candidates are read a page at a time in ``(updated_at, thread_id)`` order
  through ``tether_threads_activity``, never the whole table;
- :meth:`RetentionPlane.delete_quiet_thread` deletes one thread row only if it
  is still older than the cutoff and has no pending or running run, in the same
  statement, so a run created meanwhile (which touches ``updated_at``) keeps its
  thread; the audit summary moves to ``deleting`` in the same transaction.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tether.runtime.ids import tenant_store_root

__all__ = ["RetentionPlane", "Statement", "SubjectKind", "ThreadActivity"]

SubjectKind = Literal["thread", "tenant", "user"]
Statement = tuple[str, Sequence[Any]]

_LAST_RUN = """(SELECT r.{column} FROM tether_runs r WHERE r.thread_id = t.thread_id
                 ORDER BY r.seq DESC LIMIT 1)"""
_ACTIVE = """EXISTS (SELECT 1 FROM tether_runs r WHERE r.thread_id = t.thread_id
                        AND r.status IN ('pending', 'running'))"""


@dataclass(frozen=True)
class ThreadActivity:
    """One thread as the sweep sees it.

    Attributes:
        thread_id: The thread.
        tenant_id: Its tenant (``""``: the default tenant).
        created_at: When it was created (with ``thread_id``, the identity of
            its audit summary: a later thread with the same id is another one).
        updated_at: Its last activity (any run start, end or state write).
        status: The status of its newest run; ``None`` when it has none.
        assistant_id: The newest run's assistant.
        graph_id: The newest run's graph.
        active: A run of it is pending or running.
    """

    thread_id: str
    tenant_id: str
    created_at: datetime
    updated_at: datetime
    status: str | None
    assistant_id: str | None
    graph_id: str | None
    active: bool


class RetentionPlane(ABC):
    """The run store's retention, audit and erasure queries (see the module docstring)."""

    mark: str
    dialect: Literal["postgres", "sqlite"]

    @abstractmethod
    async def _read(self, sql: str, params: Sequence[Any]) -> Sequence[Any]: ...

    @abstractmethod
    async def _execute(self, sql: str, params: Sequence[Any]) -> int: ...

    @abstractmethod
    async def _execute_all(self, statements: Sequence[Statement]) -> builtins.list[int]:
        """Run ``statements`` in one transaction; the rows each changed."""

    # -- time and SQL -------------------------------------------------------------------------

    def _time(self, moment: datetime | None) -> Any:
        if moment is None:
            return None
        return moment.timestamp() if self.dialect == "sqlite" else moment

    def _from_time(self, value: Any) -> datetime:
        if isinstance(value, datetime):
            return value.astimezone(UTC)
        return datetime.fromtimestamp(float(value), UTC)

    def _sql(self, text: str) -> str:
        return text.replace("?", self.mark)

    # -- candidates -----------------------------------------------------------------------------

    async def activity_page(
        self,
        *,
        before: datetime,
        after: tuple[datetime, str] | None = None,
        limit: int = 500,
    ) -> builtins.list[ThreadActivity]:
        """Threads last active before ``before``, oldest first, after the key ``after``.

        Temporary threads (the scheduler's cleanup owns them) and threads pruned
        since their last activity (:meth:`mark_pruned`) are left out.
        """
        params: list[Any] = [self._time(before)]
        keyset = ""
        if after is not None:
            keyset = "AND (t.updated_at, t.thread_id) > (?, ?)"
            params += [self._time(after[0]), after[1]]
        temporary = "t.temporary = 0" if self.dialect == "sqlite" else "NOT t.temporary"
        sql = f"""
SELECT t.thread_id, t.tenant_id, t.created_at, t.updated_at,
       {_LAST_RUN.format(column="status")} AS status,
       {_LAST_RUN.format(column="assistant_id")} AS assistant_id,
       {_LAST_RUN.format(column="graph_id")} AS graph_id,
       {_ACTIVE} AS active
  FROM tether_threads t
  LEFT JOIN tether_retention_marks m ON m.thread_id = t.thread_id
 WHERE t.updated_at < ? {keyset} AND {temporary}
   AND (m.thread_id IS NULL OR m.activity_at < t.updated_at)
 ORDER BY t.updated_at, t.thread_id
 LIMIT ?"""
        rows = await self._read(self._sql(sql), [*params, limit])
        return [self._activity(row) for row in rows]

    def _activity(self, row: Any) -> ThreadActivity:
        return ThreadActivity(
            thread_id=row["thread_id"],
            tenant_id=row["tenant_id"],
            created_at=self._from_time(row["created_at"]),
            updated_at=self._from_time(row["updated_at"]),
            status=row["status"],
            assistant_id=row["assistant_id"],
            graph_id=row["graph_id"],
            active=bool(row["active"]),
        )

    async def thread_activity(self, thread_id: str) -> ThreadActivity | None:
        """One thread as :meth:`activity_page` reports it (any tenant), or ``None``."""
        sql = f"""
SELECT t.thread_id, t.tenant_id, t.created_at, t.updated_at,
       {_LAST_RUN.format(column="status")} AS status,
       {_LAST_RUN.format(column="assistant_id")} AS assistant_id,
       {_LAST_RUN.format(column="graph_id")} AS graph_id,
       {_ACTIVE} AS active
  FROM tether_threads t WHERE t.thread_id = ?"""
        rows = await self._read(self._sql(sql), [thread_id])
        return self._activity(rows[0]) if rows else None

    async def subject_threads(
        self, kind: SubjectKind, value: str, *, after: str = "", limit: int = 500
    ) -> builtins.list[ThreadActivity]:
        """The threads of an erasure subject, in id order after ``after``.

        ``user`` matches a thread whose metadata ``owner`` or ``user_id`` is
        ``value`` (the owner LangGraph custom auth stamps), in any tenant.
        """
        if kind == "thread":
            found = await self.thread_activity(value)
            return [found] if found is not None and value > after else []
        if kind == "tenant":
            where, params = "t.tenant_id = ?", [value]
        else:
            where, params = self._owner_filter(), [value, value]
        sql = f"""
SELECT t.thread_id, t.tenant_id, t.created_at, t.updated_at,
       {_LAST_RUN.format(column="status")} AS status,
       {_LAST_RUN.format(column="assistant_id")} AS assistant_id,
       {_LAST_RUN.format(column="graph_id")} AS graph_id,
       {_ACTIVE} AS active
  FROM tether_threads t
 WHERE {where} AND t.thread_id > ?
 ORDER BY t.thread_id LIMIT ?"""
        rows = await self._read(self._sql(sql), [*params, after, limit])
        return [self._activity(row) for row in rows]

    def _owner_filter(self) -> str:
        if self.dialect == "sqlite":
            return (
                "(json_extract(t.metadata, '$.owner') = ? "
                "OR json_extract(t.metadata, '$.user_id') = ?)"
            )
        return "(t.metadata->>'owner' = ? OR t.metadata->>'user_id' = ?)"

    async def count_thread_rows(self, thread_id: str) -> dict[str, int]:
        """How many runs, run events and crons the thread has (for a receipt)."""
        sql = """
SELECT (SELECT COUNT(*) FROM tether_runs WHERE thread_id = ?) AS runs,
       (SELECT COUNT(*) FROM tether_run_events e JOIN tether_runs r ON r.run_id = e.run_id
         WHERE r.thread_id = ?) AS run_events,
       (SELECT COUNT(*) FROM tether_crons WHERE thread_id = ?) AS crons"""
        row = (await self._read(self._sql(sql), [thread_id] * 3))[0]
        return {
            "runs": int(row["runs"]),
            "run_events": int(row["run_events"]),
            "crons": int(row["crons"]),
        }

    # -- deleting and pruning ---------------------------------------------------------------

    async def delete_quiet_thread(
        self, thread_id: str, *, before: datetime | None, summary_id: str | None
    ) -> bool:
        """Delete the thread's row (runs, events and crons cascade) if it is still quiet.

        Quiet: no pending or running run and, when ``before`` is given, last
        active before it. The summary ``summary_id`` (if any) becomes
        ``deleting`` in the same transaction, so a crash after this leaves a
        record of the checkpoints still to delete. Whether the row went.
        """
        where = (
            f"thread_id = ? AND NOT {_ACTIVE.replace('t.thread_id', 'tether_threads.thread_id')}"
        )
        params: list[Any] = [thread_id]
        if before is not None:
            where += " AND updated_at < ?"
            params.append(self._time(before))
        statements: list[Statement] = [
            (self._sql(f"DELETE FROM tether_threads WHERE {where}"), params)
        ]
        if summary_id is not None:
            statements.append(
                (
                    self._sql(
                        "UPDATE tether_audit_summaries SET state = 'deleting' "
                        "WHERE summary_id = ? AND state = 'pending' AND NOT EXISTS "
                        "(SELECT 1 FROM tether_threads WHERE thread_id = ?)"
                    ),
                    [summary_id, thread_id],
                )
            )
        counts = await self._execute_all(statements)
        return counts[0] > 0

    async def mark_pruned(self, thread_id: str, activity_at: datetime) -> None:
        """Remember that the thread was pruned at its activity ``activity_at``."""
        await self._execute(
            self._sql(
                "INSERT INTO tether_retention_marks (thread_id, activity_at) "
                "SELECT thread_id, ? FROM tether_threads WHERE thread_id = ? "
                "ON CONFLICT (thread_id) DO UPDATE SET activity_at = excluded.activity_at"
            ),
            [self._time(activity_at), thread_id],
        )

    # -- audit summaries ----------------------------------------------------------------------

    async def put_audit_summary(
        self,
        summary_id: str,
        *,
        thread_id: str,
        tenant_id: str,
        summary: str,
        written_at: datetime,
        keep_until: datetime | None,
    ) -> None:
        """Write a ``pending`` summary, or refresh one still ``pending`` (nothing was
        deleted under it yet); one already ``deleting`` or ``done`` is kept as it is."""
        await self._execute(
            self._sql(
                """INSERT INTO tether_audit_summaries
                   (summary_id, thread_id, tenant_id, state, written_at, keep_until, summary)
                   VALUES (?, ?, ?, 'pending', ?, ?, ?)
                   ON CONFLICT (summary_id) DO UPDATE
                      SET summary = excluded.summary, written_at = excluded.written_at,
                          keep_until = excluded.keep_until
                    WHERE tether_audit_summaries.state = 'pending'"""
            ),
            [
                summary_id,
                thread_id,
                tenant_id,
                self._time(written_at),
                self._time(keep_until),
                summary,
            ],
        )

    async def drop_pending_summary(self, summary_id: str) -> None:
        """Delete a summary whose thread turned out not to be deletable."""
        await self._execute(
            self._sql(
                "DELETE FROM tether_audit_summaries WHERE summary_id = ? AND state = 'pending'"
            ),
            [summary_id],
        )

    async def summaries_deleting(self, *, limit: int = 500) -> builtins.list[tuple[str, str]]:
        """``(summary_id, thread_id)`` of deletions whose checkpoints may remain."""
        rows = await self._read(
            self._sql(
                "SELECT summary_id, thread_id FROM tether_audit_summaries "
                "WHERE state = 'deleting' ORDER BY written_at LIMIT ?"
            ),
            [limit],
        )
        return [(row["summary_id"], row["thread_id"]) for row in rows]

    async def finish_summary(self, summary_id: str) -> None:
        """The thread's checkpoints are gone too: the deletion is complete."""
        await self._execute(
            self._sql("UPDATE tether_audit_summaries SET state = 'done' WHERE summary_id = ?"),
            [summary_id],
        )

    async def audit_summaries(self, thread_id: str) -> builtins.list[tuple[str, str]]:
        """``(state, summary JSON)`` of the thread's summaries, oldest first."""
        rows = await self._read(
            self._sql(
                "SELECT state, summary FROM tether_audit_summaries WHERE thread_id = ? "
                "ORDER BY written_at"
            ),
            [thread_id],
        )
        return [(row["state"], row["summary"]) for row in rows]

    async def delete_audit_summaries(self, thread_id: str, *, tenant: str | None = None) -> int:
        """Delete the thread's summaries (an erasure of the thread), only those of
        ``tenant`` if given; how many."""
        if tenant is None:
            return await self._execute(
                self._sql("DELETE FROM tether_audit_summaries WHERE thread_id = ?"), [thread_id]
            )
        return await self._execute(
            self._sql("DELETE FROM tether_audit_summaries WHERE thread_id = ? AND tenant_id = ?"),
            [thread_id, tenant],
        )

    async def _tables(self, names: Sequence[str]) -> set[str]:
        """Which of ``names`` are tables of this database (the server creates some)."""
        marks = ", ".join("?" for _ in names)
        if self.dialect == "sqlite":
            sql = f"SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({marks})"
        else:
            sql = (
                "SELECT tablename AS name FROM pg_tables "
                f"WHERE schemaname = current_schema() AND tablename IN ({marks})"
            )
        return {str(row["name"]) for row in await self._read(self._sql(sql), list(names))}

    async def delete_tenant_rows(self, tenant: str) -> dict[str, int]:
        """Delete what a tenant keeps outside its threads: its thread-less crons, its
        assistants (with their versions; not the graphs' system assistants every tenant
        shares), its items in the server's store and its API keys. How many of each
        (``crons``, ``assistants``, ``store_items``, ``api_keys``), in one transaction."""
        if self.dialect == "sqlite":
            system = "json_extract(metadata, '$.created_by') = 'system'"
        else:
            system = "metadata->>'created_by' = 'system'"
        server = await self._tables(["store", "tether_api_keys"])
        root = tenant_store_root(tenant)
        named: builtins.list[tuple[str, Statement]] = [
            (
                "crons",
                (
                    self._sql("DELETE FROM tether_crons WHERE tenant_id = ? AND thread_id IS NULL"),
                    [tenant],
                ),
            ),
            (
                "assistants",
                (
                    self._sql(
                        f"DELETE FROM tether_assistants WHERE tenant_id = ? "
                        f"AND NOT COALESCE({system}, FALSE)"
                    ),
                    [tenant],
                ),
            ),
        ]
        if "store" in server:  # LangGraph's store table, made by the server's first store call
            delete = self._sql("DELETE FROM store WHERE prefix = ? OR prefix LIKE ?")
            named.append(("store_items", (delete, [root, root + ".%"])))
        if "tether_api_keys" in server:
            delete = self._sql("DELETE FROM tether_api_keys WHERE tenant_id = ?")
            named.append(("api_keys", (delete, [tenant])))
        deleted = await self._execute_all([statement for _, statement in named])
        counts = dict.fromkeys(("crons", "assistants", "store_items", "api_keys"), 0)
        counts.update(zip((name for name, _ in named), deleted, strict=True))
        return counts

    async def expire_audit(self, now: datetime, *, limit: int = 500) -> int:
        """Delete up to ``limit`` finished summaries and receipts past their ``keep_until``."""
        deleted = 0
        for table, key, extra in (
            ("tether_audit_summaries", "summary_id", " AND state = 'done'"),
            ("tether_erasure_receipts", "receipt_id", ""),
        ):
            deleted += await self._execute(
                self._sql(
                    f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table} "
                    f"WHERE keep_until IS NOT NULL AND keep_until < ?{extra} LIMIT ?)"
                ),
                [self._time(now), limit],
            )
        return deleted

    # -- erasure receipts ---------------------------------------------------------------------

    async def put_receipt(
        self,
        receipt_id: str,
        *,
        receipt: str,
        thread_hashes: Sequence[str],
        written_at: datetime,
        keep_until: datetime | None,
    ) -> None:
        """Store an erasure receipt, findable by each erased thread's id hash."""
        statements: list[Statement] = [
            (
                self._sql(
                    "INSERT INTO tether_erasure_receipts (receipt_id, written_at, keep_until, "
                    "receipt) VALUES (?, ?, ?, ?)"
                ),
                [receipt_id, self._time(written_at), self._time(keep_until), receipt],
            )
        ]
        statements += [
            (
                self._sql(
                    "INSERT INTO tether_erasure_receipt_threads (receipt_id, thread_sha256) "
                    "VALUES (?, ?)"
                ),
                [receipt_id, digest],
            )
            for digest in dict.fromkeys(thread_hashes)
        ]
        await self._execute_all(statements)

    async def receipts_for(self, thread_sha256: str) -> builtins.list[str]:
        """The receipts (JSON) of erasures that deleted the thread with this id hash."""
        rows = await self._read(
            self._sql(
                "SELECT r.receipt FROM tether_erasure_receipts r "
                "JOIN tether_erasure_receipt_threads t ON t.receipt_id = r.receipt_id "
                "WHERE t.thread_sha256 = ? ORDER BY r.written_at"
            ),
            [thread_sha256],
        )
        return [row["receipt"] for row in rows]

    async def get_receipt(self, receipt_id: str) -> str | None:
        """One receipt (JSON) by id."""
        rows = await self._read(
            self._sql("SELECT receipt FROM tether_erasure_receipts WHERE receipt_id = ?"),
            [receipt_id],
        )
        return rows[0]["receipt"] if rows else None
