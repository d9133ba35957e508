"""SQLite checkpointer: LangGraph's AsyncSqliteSaver plus the capabilities it lacks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from tether.checkpointing._bridge import SyncBridge
from tether.checkpointing.prune import check_prune_args
from tether.checkpointing.url import CheckpointerURL
from tether.errors import BackendUnavailableError, ConfigurationError

try:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
except ImportError as exc:  # pragma: no cover - both are core dependencies
    from tether.errors import MissingDependencyError

    raise MissingDependencyError("the SQLite checkpointer", "sqlite") from exc

__all__ = ["SqliteSaver", "open_sqlite"]

# Orphaned writes: rows whose checkpoint no longer exists in the same thread/namespace.
_DELETE_ORPHAN_WRITES = """
DELETE FROM writes WHERE NOT EXISTS (
    SELECT 1 FROM checkpoints c
    WHERE c.thread_id = writes.thread_id AND c.checkpoint_ns = writes.checkpoint_ns
      AND c.checkpoint_id = writes.checkpoint_id)
"""


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


class SqliteSaver(SyncBridge, AsyncSqliteSaver):
    """``AsyncSqliteSaver`` with ``delete_for_runs``, ``copy_thread`` and ``prune``.

    Works from async code directly and from sync code through
    :func:`tether.open_checkpointer_sync`.
    """

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint (and its writes) whose metadata ``run_id`` is listed."""
        ids = [str(r) for r in run_ids]
        if not ids:
            return
        await self.setup()
        async with self.lock:
            await self.conn.execute(
                "DELETE FROM checkpoints WHERE json_extract(CAST(metadata AS TEXT), '$.run_id') "
                f"IN ({_marks(ids)})",
                ids,
            )
            await self.conn.execute(_DELETE_ORPHAN_WRITES)
            await self.conn.commit()

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another, in one transaction."""
        await self.setup()
        async with self.lock:
            await self.conn.execute(
                "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                "parent_checkpoint_id, type, checkpoint, metadata) "
                "SELECT ?, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
                "metadata FROM checkpoints WHERE thread_id = ?",
                (str(target_thread_id), str(source_thread_id)),
            )
            await self.conn.execute(
                "INSERT OR REPLACE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
                "task_path, idx, channel, type, value) "
                "SELECT ?, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, "
                "value FROM writes WHERE thread_id = ?",
                (str(target_thread_id), str(source_thread_id)),
            )
            await self.conn.commit()

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only the newest checkpoint per namespace, or delete everything.

        Args:
            thread_ids: Threads to prune.
            strategy: ``"keep_latest"`` or ``"delete"``.
        """
        ids = check_prune_args(thread_ids, strategy)
        if not ids:
            return
        await self.setup()
        async with self.lock:
            if strategy == "delete":
                await self.conn.execute(
                    f"DELETE FROM checkpoints WHERE thread_id IN ({_marks(ids)})", ids
                )
            else:
                await self.conn.execute(
                    f"DELETE FROM checkpoints WHERE thread_id IN ({_marks(ids)}) "
                    "AND checkpoint_id < (SELECT MAX(c.checkpoint_id) FROM checkpoints c "
                    "WHERE c.thread_id = checkpoints.thread_id "
                    "AND c.checkpoint_ns = checkpoints.checkpoint_ns)",
                    ids,
                )
            await self.conn.execute(_DELETE_ORPHAN_WRITES)
            await self.conn.commit()


@asynccontextmanager
async def open_sqlite(url: CheckpointerURL, **options: Any) -> AsyncIterator[SqliteSaver]:
    """Open the SQLite database ``url`` names and yield a set-up saver."""
    if options:
        raise ConfigurationError(
            f"unknown option(s) for sqlite: {', '.join(sorted(options))}; it accepts none"
        )
    try:
        conn = await aiosqlite.connect(url.sqlite_path)
    except Exception as exc:
        raise BackendUnavailableError(
            f"cannot open SQLite database {url.sqlite_path!r}: {exc}"
        ) from exc
    try:
        saver = SqliteSaver(conn)
        await saver.setup()
        yield saver
    finally:
        await conn.close()
