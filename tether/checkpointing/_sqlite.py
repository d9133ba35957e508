"""SQLite checkpointer: LangGraph's AsyncSqliteSaver plus the capabilities it lacks.

Its writes (``aput``, ``aput_writes``, ``adelete_for_runs``) are each one
``BEGIN IMMEDIATE … COMMIT`` run in a single hop on the connection's thread.
Upstream executes the statement, returns to the event loop and then commits,
so a process stopped (SIGSTOP, a debugger, a VM pause) between the two held
SQLite's write lock, and every other process on the file (workers taking over
this one's runs included) waited for it; a failed statement left the
transaction, and the lock, open until the next commit. A worker's fence
(:mod:`tether.checkpointing._fencing`) is checked by triggers inside that
same transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.constants import TASKS

from tether.boundaries import Fence
from tether.checkpointing._bridge import SyncBridge, read_all
from tether.checkpointing._cascade import (
    check_run_ids,
    check_thread_ids,
    delete_records_of_runs,
    delete_records_of_threads,
)
from tether.checkpointing._fencing import drop_sqlite_fence, hold_sqlite_fence, lease_lost
from tether.checkpointing._prune import (
    DELTA_MARKERS,
    CheckpointRow,
    check_prune_args,
    latest_per_namespace,
    plan_keep_latest,
    refuse_delta_threads,
    sends_parent_candidates,
    uses_delta_channel,
)
from tether.checkpointing._url import CheckpointerURL
from tether.errors import BackendUnavailableError, ConfigurationError

try:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
except ImportError as exc:  # pragma: no cover - both are core dependencies
    from tether.errors import MissingDependencyError

    raise MissingDependencyError("the SQLite checkpointer", "sqlite") from exc

__all__ = ["SqliteSaver", "open_sqlite", "write_transaction"]

T = TypeVar("T")

# Orphaned writes: rows whose checkpoint no longer exists in the same thread/namespace.
_DELETE_ORPHAN_WRITES = """
DELETE FROM writes WHERE NOT EXISTS (
    SELECT 1 FROM checkpoints c
    WHERE c.thread_id = writes.thread_id AND c.checkpoint_ns = writes.checkpoint_ns
      AND c.checkpoint_id = writes.checkpoint_id)
"""

# Threads whose metadata carries a DeltaChannel marker (json_type is NULL only
# for a missing key, so a marker whose value is null still counts).
_DELTA_THREADS = (
    "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id IN ({marks}) AND ("
    + " OR ".join(f"json_type(CAST(metadata AS TEXT), '$.{m}') IS NOT NULL" for m in DELTA_MARKERS)
    + ")"
)
_ROWS = (
    "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata "
    "FROM checkpoints WHERE thread_id = ?"
)


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


def write_transaction(db: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """``fn(db)`` as one ``BEGIN IMMEDIATE`` transaction: committed, or rolled back.

    Runs on the connection's thread, start to end, so the write lock is never
    held across an ``await``. A refused fence becomes ``LeaseLostError``.
    """
    if db.in_transaction:  # left open by someone else's failed statement
        db.commit()
    # IMMEDIATE takes the write lock before any read.
    db.execute("BEGIN IMMEDIATE")
    try:
        result = fn(db)
    except BaseException as exc:
        db.rollback()
        lost = lease_lost(exc)
        if lost is not None:
            raise lost from exc
        raise
    db.commit()
    return result


class SqliteSaver(SyncBridge, AsyncSqliteSaver):
    """``AsyncSqliteSaver`` with ``delete_for_runs``, ``copy_thread`` and ``prune``.

    Works from async code directly and from sync code through
    :func:`tether.open_checkpointer_sync`. A listing may be abandoned at any
    point, from sync or async code.
    """

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Upstream's ``alist``, read whole under the saver's lock and yielded after it.

        Upstream yields each tuple while it holds the lock and an open cursor,
        so a caller that stops early (LangGraph's replay returns from inside
        the loop) kept every other call of this saver waiting until the
        generator was finalized, and forever when that happened outside the
        saver's loop.
        """
        page = await read_all(super().alist(config, filter=filter, before=before, limit=limit))
        for item in page:
            yield item

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` as one write transaction on the connection's thread, under the lock."""
        await self.setup()
        async with self.lock:
            result: T = await self.conn._execute(lambda: write_transaction(self.conn._conn, fn))
            return result

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Upstream's ``aput``, as one transaction in one hop (see the module's docstring)."""
        configurable = config["configurable"]
        thread_id = configurable["thread_id"]
        checkpoint_ns = configurable["checkpoint_ns"]
        type_, serialized = self.serde.dumps_typed(checkpoint)
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False)
        row = (
            str(thread_id),
            checkpoint_ns,
            checkpoint["id"],
            configurable.get("checkpoint_id"),
            type_,
            serialized,
            meta.encode("utf-8", "ignore"),
        )
        await self._write(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
                row,
            )
        )
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Upstream's ``aput_writes``, as one transaction in one hop."""
        verb = "REPLACE" if all(w[0] in WRITES_IDX_MAP for w in writes) else "IGNORE"
        configurable = config["configurable"]
        rows = [
            (
                str(configurable["thread_id"]),
                str(configurable["checkpoint_ns"]),
                str(configurable["checkpoint_id"]),
                task_id,
                task_path,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                *self.serde.dumps_typed(value),
            )
            for idx, (channel, value) in enumerate(writes)
        ]
        await self._write(
            lambda db: db.executemany(
                f"INSERT OR {verb} INTO writes (thread_id, checkpoint_ns, checkpoint_id, "
                "task_id, task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        )

    async def hold_fence(self, fence: Fence) -> None:
        """Refuse this connection's writes of ``fence.thread_id`` once the fence moves on."""
        await self.setup()
        async with self.lock:
            await self.conn._execute(lambda: hold_sqlite_fence(self.conn._conn, fence))

    async def drop_fence(self, fence: Fence) -> None:
        """Stop checking ``fence`` (the run was finished or released)."""
        async with self.lock:
            await self.conn._execute(lambda: drop_sqlite_fence(self.conn._conn, fence))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint (and its writes) whose metadata ``run_id`` is listed."""
        ids = check_run_ids(run_ids)
        if not ids:
            return

        def delete(db: sqlite3.Connection) -> None:
            db.execute(
                "DELETE FROM checkpoints WHERE json_extract(CAST(metadata AS TEXT), '$.run_id') "
                f"IN ({_marks(ids)})",
                ids,
            )
            db.execute(_DELETE_ORPHAN_WRITES)

        await self._write(delete)
        await delete_records_of_runs(self, ids)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints and writes, then tether's records of it."""
        await super().adelete_thread(thread_id)
        await delete_records_of_threads(self, [thread_id])

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
        """Delete threads, or keep each namespace's latest checkpoint.

        ``"keep_latest"`` follows the rules in :mod:`tether.checkpointing._prune`,
        the same on every backend; each thread is pruned in one transaction.

        Args:
            thread_ids: Threads to prune.
            strategy: ``"keep_latest"`` or ``"delete"``.

        Raises:
            IdArgumentError: ``thread_ids`` is a single string, or not a collection.
            ConfigurationError: ``strategy`` is unknown.
            NotImplementedError: ``"keep_latest"`` on a thread that uses a
                ``DeltaChannel``; nothing is pruned then.
        """
        ids = check_prune_args(check_thread_ids(thread_ids), strategy)
        if not ids:
            return
        await self.setup()
        if strategy == "delete":
            async with self.lock:
                for table in ("checkpoints", "writes"):
                    await self.conn.execute(
                        f"DELETE FROM {table} WHERE thread_id IN ({_marks(ids)})", ids
                    )
                await self.conn.commit()
            await delete_records_of_threads(self, ids)
            return
        async with self.lock:
            async with self.conn.execute(_DELTA_THREADS.format(marks=_marks(ids)), ids) as cur:
                refuse_delta_threads(row[0] for row in await cur.fetchall())
            for thread_id in ids:
                try:
                    await self._keep_latest(thread_id)
                except BaseException:
                    await self.conn.rollback()
                    raise
                await self.conn.commit()

    async def _keep_latest(self, thread_id: str) -> None:
        """One thread's keep_latest, inside a transaction the caller ends."""
        # BEGIN IMMEDIATE takes the write lock first, so the rows read are the rows pruned.
        if not self.conn.in_transaction:
            await self.conn.execute("BEGIN IMMEDIATE")
        async with self.conn.execute(_ROWS, (thread_id,)) as cur:
            found = await cur.fetchall()
        if any(uses_delta_channel(_metadata(row[3])) for row in found):
            refuse_delta_threads([thread_id])  # started using one since the batch check
        rows = [
            CheckpointRow.from_metadata(ns, cid, parent, _metadata(meta))
            for ns, cid, parent, meta in found
        ]
        heads = latest_per_namespace(rows)
        versions = {}
        for ns, head in heads.items():
            async with self.conn.execute(
                "SELECT type, checkpoint FROM checkpoints "
                "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (thread_id, ns, head.checkpoint_id),
            ) as cur:
                found_head = await cur.fetchone()
            checkpoint = self.serde.loads_typed(tuple(found_head)) if found_head else {}
            versions[ns] = int(checkpoint.get("v", 4))
        sends = {}
        for ns, parent in sends_parent_candidates(heads, versions).items():
            async with self.conn.execute(
                "SELECT 1 FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
                "AND checkpoint_id = ? AND channel = ? LIMIT 1",
                (thread_id, ns, parent, TASKS),
            ) as cur:
                if await cur.fetchone():
                    sends[ns] = parent
        plan = plan_keep_latest(rows, sends)
        for ns in plan.dropped_namespaces:
            for table in ("checkpoints", "writes"):
                await self.conn.execute(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ?",
                    (thread_id, ns),
                )
        for table in ("checkpoints", "writes"):
            await self.conn.executemany(
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? "
                "AND checkpoint_id = ?",
                [(thread_id, ns, cid) for ns, cid in sorted(plan.deleted)],
            )
        await self.conn.executemany(
            "UPDATE checkpoints SET parent_checkpoint_id = NULL "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            [(thread_id, ns, cid) for ns, cid in sorted(plan.orphaned)],
        )

    # Upstream's sync list steps alist from the caller's thread; see _bridged_list.
    # Assigned last: the name would shadow the builtin in the annotations above.
    list = SyncBridge._bridged_list


def _metadata(raw: bytes | str | None) -> dict[str, Any]:
    loaded = json.loads(raw) if raw else {}
    return loaded if isinstance(loaded, dict) else {}


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
