"""PostgreSQL checkpointer: LangGraph's AsyncPostgresSaver, pooled, plus the capabilities
it lacks (``delete_for_runs`` and ``copy_thread``).

Under a worker's guard whose run store shares this database, every write
transaction starts with ``SELECT tether_assert_fence(run_id, token)``
(:mod:`tether.checkpointing._fencing`): a worker that lost its run commits
nothing for it, and gets ``LeaseLostError``.

Connected as a restricted worker role (``tether workers grant``), whose
row-level policies show only the thread of the run a transaction names, the
saver also names the run in its reads: the scope travels in the same
pipeline as the read, so it costs no round trip.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from tether._in_flight import before_checkpoint
from tether.checkpointing._bridge import SyncBridge, read_all
from tether.checkpointing._cascade import (
    check_run_ids,
    check_thread_ids,
    delete_records_of_runs,
    delete_records_of_threads,
)
from tether.checkpointing._fencing import (
    assert_fence,
    fence_errors,
    fenced_transaction,
    scope_reads,
    transaction_fence,
)
from tether.checkpointing._prune import check_prune_args
from tether.checkpointing._settling import SettlesRecordWrites
from tether.checkpointing._url import CheckpointerURL, redact
from tether.errors import BackendUnavailableError, ConfigurationError, MissingDependencyError

try:
    import psycopg
    from langgraph.checkpoint.postgres import _ainternal
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import DictRow, dict_row
    from psycopg.types.json import Jsonb
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:
    raise MissingDependencyError("the PostgreSQL checkpointer", "postgres") from exc

__all__ = [
    "IDLE_TRANSACTION_TIMEOUT_MS",
    "PostgresSaver",
    "abort_idle_transactions",
    "open_postgres",
]

_OPTIONS = {"min_size", "max_size", "connect_timeout"}
_SETUP_ATTEMPTS = 20
log = logging.getLogger(__name__)

# Serialises open_postgres' setup across processes (see _set_up_alone).
_SETUP_LOCK = 0x7E7E_5702
_SETUP_WAIT_WARNING = 10.0  # seconds waited for the setup lock before saying who holds it
# The backend holding the (bigint-keyed) session advisory lock: its pid, state,
# seconds in that state, and application name.
_SETUP_HOLDER = """SELECT a.pid, a.state, extract(epoch FROM now() - a.state_change)::float8,
       a.application_name
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
   AND ((l.classid::bigint << 32) | l.objid::bigint) = %s"""
# What a concurrent run of the same migration raises (two CREATE INDEX
# CONCURRENTLY on one table wait for each other; the server aborts one).
_SETUP_RACES = (
    psycopg.errors.DeadlockDetected,
    psycopg.errors.UniqueViolation,
    psycopg.errors.DuplicateTable,
    psycopg.errors.DuplicateObject,
)

# Blobs no remaining checkpoint of the thread refers to.
_DELETE_ORPHAN_BLOBS = """
DELETE FROM checkpoint_blobs b WHERE b.thread_id = ANY(%s) AND NOT EXISTS (
    SELECT 1 FROM checkpoints c
    WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
      AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)
"""
_DELETE_ORPHAN_WRITES = """
DELETE FROM checkpoint_writes w WHERE w.thread_id = ANY(%s) AND NOT EXISTS (
    SELECT 1 FROM checkpoints c
    WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns
      AND c.checkpoint_id = w.checkpoint_id)
"""
_COPY_SQL = (
    """INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
        type, checkpoint, metadata)
    SELECT %(dst)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
    FROM checkpoints WHERE thread_id = %(src)s ON CONFLICT DO NOTHING""",
    """INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(dst)s, checkpoint_ns, channel, version, type, blob
    FROM checkpoint_blobs WHERE thread_id = %(src)s ON CONFLICT DO NOTHING""",
    """INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,
        channel, type, blob, task_path)
    SELECT %(dst)s, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path
    FROM checkpoint_writes WHERE thread_id = %(src)s ON CONFLICT DO NOTHING""",
)


_INLINE = (str, int, float, bool)


def _has_nul(value: object) -> bool:
    """Text ``jsonb`` cannot hold: upstream keeps plain text inline in the checkpoint's
    ``jsonb``, and a NUL failed the whole write (``UntranslatableCharacter``); such a
    value is stored as a blob instead, and reads back exactly."""
    return isinstance(value, str) and "\x00" in value


class PostgresSaver(SettlesRecordWrites, SyncBridge, AsyncPostgresSaver):
    """``AsyncPostgresSaver`` with ``delete_for_runs`` and ``copy_thread``.

    Works from async code directly and from sync code through
    :func:`tether.open_checkpointer_sync`. A listing may be abandoned at any
    point, from sync or async code. Writes made for a run check its fence in
    their own transaction (see the module's docstring). Text holding NUL
    characters is stored exactly (see :func:`_has_nul`). No saver call waits
    for a thread of the event loop's pool while it holds the saver's lock (see
    :meth:`aput`).

    A saver connected as a role that row-level security restricts
    (:attr:`scoped`) names the current run's scope before its reads.
    """

    # Row-level security applies to this connection's role on ``checkpoints``
    # (a worker role made by ``tether workers grant``); set by open_postgres.
    scoped: bool = False

    @asynccontextmanager
    async def _cursor(
        self, *, pipeline: bool = False
    ) -> AsyncIterator[psycopg.AsyncCursor[DictRow]]:
        """Upstream's cursor; a write cursor (``pipeline=True``) checks the run's fence first.

        Upstream asks for ``pipeline=True`` exactly for its writes (``aput``,
        ``aput_writes``, ``adelete_thread``). Under a same-database guard the
        cursor's statements are one transaction whose first statement is
        ``tether_assert_fence``, all sent in one pipeline
        (:func:`~tether.checkpointing._fencing.fenced_transaction`).
        A scoped saver's read cursor runs in pipeline mode after the run's
        scope (see :meth:`_scoped_reads`).
        """
        if not pipeline and self.scoped and self.pipe is None and transaction_fence() is not None:
            async with self._scoped_reads() as cur:
                yield cur
            return
        if not pipeline or self.pipe is not None or transaction_fence() is None:
            async with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        async with (
            self.lock,
            _ainternal.get_connection(self.conn) as conn,
            fence_errors(),
            conn.cursor(binary=True, row_factory=dict_row) as cur,
            fenced_transaction(cur, pipeline=self.supports_pipeline),
        ):
            yield cur

    @asynccontextmanager
    async def _scoped_reads(self) -> AsyncIterator[psycopg.AsyncCursor[DictRow]]:
        """A read cursor whose statements see the current run's thread, for a scoped role.

        The scope is transaction-local and queued first in a pipeline: the
        statements up to the pipeline's first sync (the first fetch) run in one
        implicit transaction, so the scope and the read travel together.
        """
        async with (
            self.lock,
            _ainternal.get_connection(self.conn) as conn,
            fence_errors(),
            conn.pipeline(),
            conn.cursor(binary=True, row_factory=dict_row) as cur,
        ):
            await scope_reads(cur)
            yield cur

    async def migrated(self) -> bool:
        """Whether every upstream migration is recorded (then :meth:`setup` runs no DDL)."""
        async with _ainternal.get_connection(self.conn) as conn:
            cur = await conn.execute(
                "SELECT to_regclass('checkpoint_migrations') IS NOT NULL AS present"
            )
            row = await cur.fetchone()
            if row is None or not row["present"]:
                return False
            cur = await conn.execute("SELECT COALESCE(MAX(v), -1) AS v FROM checkpoint_migrations")
            row = await cur.fetchone()
        return row is not None and int(row["v"]) >= len(self.MIGRATIONS) - 1

    async def setup(self) -> None:
        """Upstream's migrations, run again when another process ran one at the same moment.

        Upstream records each migration with a plain ``INSERT`` and cannot
        take a lock around them (some create indexes ``CONCURRENTLY``, which
        no transaction may enclose), so two processes starting together (two
        workers) could both run a migration and the second failed with a
        duplicate key or a deadlock. :func:`open_postgres` serialises its
        setups with an advisory lock; for a saver set up another way, every
        migration is idempotent (``IF NOT EXISTS``), so the loser runs
        ``setup`` again from the version now recorded. A database already
        migrated is left alone, so a role without DDL rights can open it.
        """
        if await self.migrated():
            return
        for attempt in range(_SETUP_ATTEMPTS):
            try:
                await super().setup()
                return
            except _SETUP_RACES:
                if attempt == _SETUP_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint: upstream's statements, with its values serialized first.

        Upstream serializes the blobs with ``asyncio.to_thread`` *while it holds
        the saver's lock and a connection*. A worker runs sync nodes on that
        same thread pool; when every pool thread is a sync node waiting for the
        saver (a durable tool's record, a checkpoint read), the thread that
        would release the lock never comes, and the worker hangs for good (6
        runs at once on 2 CPUs). Here the values are serialized before the
        lock is taken, on the calling loop (no pool thread needed). Text that
        ``jsonb`` cannot hold goes to the blobs (:func:`_has_nul`).
        """
        configurable = config["configurable"]
        thread_id = configurable["thread_id"]
        await before_checkpoint(config)
        checkpoint_ns = configurable["checkpoint_ns"]
        inline = dict(checkpoint["channel_values"])
        blob_values: dict[str, Any] = {}
        for key, value in checkpoint["channel_values"].items():
            if isinstance(value, _DeltaSnapshot):
                blob_values[key] = inline.pop(key)
                inline[key] = True  # upstream's marker: the value is in the blobs
            elif _has_nul(value) or not (value is None or isinstance(value, _INLINE)):
                blob_values[key] = inline.pop(key)
        versions = {k: v for k, v in new_versions.items() if k in blob_values}
        blobs = self._dump_blobs(thread_id, checkpoint_ns, blob_values, versions)
        stored = {**checkpoint, "channel_values": inline}
        meta = Jsonb(get_serializable_checkpoint_metadata(config, metadata))
        async with self._cursor(pipeline=True) as cur:
            if blobs:
                await cur.executemany(self.UPSERT_CHECKPOINT_BLOBS_SQL, blobs)
            await cur.execute(
                self.UPSERT_CHECKPOINTS_SQL,
                (
                    thread_id,
                    checkpoint_ns,
                    checkpoint["id"],
                    configurable.get("checkpoint_id"),
                    Jsonb(stored),
                    meta,
                ),
            )
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def _load_checkpoint_tuple(self, value: DictRow) -> CheckpointTuple:
        """Upstream's, with pending writes loaded here rather than on a pool thread.

        Upstream calls it while it holds the saver's lock (``aget_tuple``,
        ``alist``); see :meth:`aput` for why that must not wait for a thread.
        """
        checkpoint: Checkpoint = value["checkpoint"]
        values = {
            **(checkpoint.get("channel_values") or {}),
            **self._load_blobs(value["channel_values"]),
        }
        parent = value["parent_checkpoint_id"]
        return CheckpointTuple(
            self._address(value, value["checkpoint_id"]),
            {**checkpoint, "channel_values": values},
            value["metadata"],
            self._address(value, parent) if parent else None,
            self._load_writes(value["pending_writes"]),
        )

    @staticmethod
    def _address(value: DictRow, checkpoint_id: str) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": value["thread_id"],
                "checkpoint_ns": value["checkpoint_ns"],
                "checkpoint_id": checkpoint_id,
            }
        }

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Upstream's ``alist``, read whole before the first yield.

        Upstream yields each tuple while it holds its pooled connection, so a
        caller that stops early (LangGraph's replay returns from inside the
        loop) kept that connection until the generator was finalized, and for
        good when that happened outside the saver's loop: a few such replays
        exhaust the pool and every later call waits.
        """
        page = await read_all(super().alist(config, filter=filter, before=before, limit=limit))
        for item in page:
            yield item

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint (and its writes and unshared blobs) of the listed runs."""
        ids = check_run_ids(run_ids)
        if not ids:
            return
        async with fence_errors(), self._cursor() as cur, cur.connection.transaction():
            await assert_fence(cur)
            await cur.execute(
                "DELETE FROM checkpoints WHERE metadata ->> 'run_id' = ANY(%s) RETURNING thread_id",
                (ids,),
            )
            threads = sorted({row["thread_id"] for row in await cur.fetchall()})
            if threads:
                await cur.execute(_DELETE_ORPHAN_WRITES, (threads,))
                await cur.execute(_DELETE_ORPHAN_BLOBS, (threads,))
        await delete_records_of_runs(self, ids)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, blobs and writes, then tether's records of it."""
        await super().adelete_thread(thread_id)
        await delete_records_of_threads(self, [thread_id])

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Upstream's prune; with ``strategy="delete"`` tether's records of the threads go too."""
        ids = check_prune_args(check_thread_ids(thread_ids), strategy)
        await super().aprune(ids, strategy=strategy)
        if strategy == "delete":
            await delete_records_of_threads(self, ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, blob and write of one thread to another, atomically."""
        params = {"src": str(source_thread_id), "dst": str(target_thread_id)}
        async with self._cursor() as cur, cur.connection.transaction():
            for sql in _COPY_SQL:
                await cur.execute(sql, params)

    # Upstream's sync list steps alist from the caller's thread; see _bridged_list.
    # Assigned last: the name would shadow the builtin in the annotations above.
    list = SyncBridge._bridged_list


def _pool_options(options: dict[str, Any]) -> tuple[int, int, float]:
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) for postgres: {', '.join(sorted(unknown))}; "
            f"accepted: {', '.join(sorted(_OPTIONS))}"
        )
    return (
        int(options.get("min_size", 1)),
        int(options.get("max_size", 10)),
        float(options.get("connect_timeout", 5)),
    )


# tether's transactions run no user code and never wait on anything but the
# database, so one that sits idle is held by a process that stopped (SIGSTOP, a
# debugger, a VM pause) or lost its network. The server aborts it after this
# long, releasing its locks, so a stopped process cannot block the others (for
# example a worker taking over that process's runs).
IDLE_TRANSACTION_TIMEOUT_MS = 5000


async def abort_idle_transactions(conn: Any) -> None:
    """Pool ``configure`` hook: the server aborts this session's idle transactions."""
    await conn.execute(f"SET idle_in_transaction_session_timeout = {IDLE_TRANSACTION_TIMEOUT_MS}")


@asynccontextmanager
async def open_postgres(url: CheckpointerURL, **options: Any) -> AsyncIterator[PostgresSaver]:
    """Connect a pool to the PostgreSQL server ``url`` names and yield a set-up saver.

    Args:
        url: The parsed ``postgresql://`` URL.
        **options: ``min_size`` and ``max_size`` of the pool, ``connect_timeout``
            in seconds.
    """
    min_size, max_size, timeout = _pool_options(options)
    conninfo = url.url.replace("postgres://", "postgresql://", 1)
    try:
        # One direct connection first: it fails fast with the server's own reason,
        # where a pool would only time out.
        probe = await psycopg.AsyncConnection.connect(
            conninfo, connect_timeout=max(1, math.ceil(timeout)), autocommit=True
        )
    except psycopg.OperationalError as exc:
        raise BackendUnavailableError(
            f"cannot reach PostgreSQL at {url.where} ({redact(url.url)}): "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}"
        ) from exc
    pool = AsyncConnectionPool(
        conninfo,
        min_size=min_size,
        max_size=max_size,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        configure=abort_idle_transactions,
    )
    try:
        await pool.open(wait=True, timeout=timeout)
        saver = PostgresSaver(pool)
        await _set_up_alone(saver, probe)
        saver.scoped = await _row_security_active(probe)
    except BaseException:
        await pool.close()
        raise
    finally:
        await probe.close()
    try:
        yield saver
    finally:
        await pool.close()


async def _row_security_active(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether row-level security restricts this connection's role on ``checkpoints``."""
    cur = await conn.execute("SELECT row_security_active('checkpoints')")
    row = await cur.fetchone()
    return bool(row and row[0])


async def _set_up_alone(saver: PostgresSaver, conn: psycopg.AsyncConnection[Any]) -> None:
    """``saver.setup()`` while no other tether process sets up this database.

    The lock is a session advisory lock on ``conn`` (not one of the pool's
    connections, so a pool of one still works), taken with ``pg_try_`` and
    polled: a session *waiting* for the lock would hold a snapshot, and the
    migrations' ``CREATE INDEX CONCURRENTLY`` waits for every older snapshot.
    Closing ``conn`` releases it. A database already migrated needs no setup and
    takes no lock, so a process stopped while it held the lock (SIGSTOP, a
    debugger) keeps nobody else from opening the database.
    """
    if await saver.migrated():
        return
    began = time.monotonic()
    warn_at = began + _SETUP_WAIT_WARNING
    while True:
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (_SETUP_LOCK,))
        row = await cur.fetchone()
        if row is not None and row[0]:
            break
        if time.monotonic() >= warn_at:
            await _warn_setup_wait(conn, time.monotonic() - began)
            warn_at = time.monotonic() + 6 * _SETUP_WAIT_WARNING
        await asyncio.sleep(0.05)
    await saver.setup()


async def _warn_setup_wait(conn: psycopg.AsyncConnection[Any], waited: float) -> None:
    """Log who holds the checkpoint setup lock this process has waited ``waited`` s for.

    The lock is a session lock (see :func:`_set_up_alone`), so a holder that is
    stopped between its setup statements keeps it with no server-side timeout:
    the warning names its backend, what it is doing and since when, and how an
    operator ends it.
    """
    cur = await conn.execute(_SETUP_HOLDER, (_SETUP_LOCK,))
    holder = await cur.fetchone()
    if holder is None:
        return
    pid, state, idle, application = holder
    log.warning(
        "waited %.0f s to set up the checkpoint tables: PostgreSQL backend %s (application "
        "%r) holds tether's setup lock and is %s, unchanged for %.0f s. If the process "
        "setting up is stopped or hung, end it, or run SELECT pg_terminate_backend(%s)",
        waited,
        pid,
        application or "",
        state or "unknown",
        idle or 0.0,
        pid,
    )
