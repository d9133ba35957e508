"""The PostgreSQL run store's worker plane: claim, heartbeat, release, finish, events (§3.3).

Every write for a held run names its fence in the same statement
(``WHERE run_id = … AND fence = … AND status = 'running'``); when that matches
no row the transaction rolls back and :class:`FenceLostError` is raised, so a
worker that lost its run writes nothing. Locks are taken thread row first,
then run row, as the control plane does; the claims use ``SKIP LOCKED`` and
never wait.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tether.checkpointing import EncryptionError, queued_transaction
from tether.runtime.errors import FenceLostError, RuntimeSchemaError
from tether.runtime.models import Run
from tether.runtime.store.base import Claim, Held, Hold, NewEvent, Outcome, WorkerInfo
from tether.runtime.store.control import (
    MISSING_SCHEMA,
    attempts_exceeded,
    finish_params,
    finished_data,
    unreadable,
)
from tether.runtime.store.encoding import dumps
from tether.runtime.store.postgres_claims import CLAIM_EXPIRED, CLAIM_PENDING
from tether.runtime.store.rows import POSTGRES, Dialect
from tether.runtime.store.sealing import Sealer

__all__ = [
    "ENDED",
    "PostgresWorkerPlane",
    "insert_events",
    "lease_hash",
    "new_secret",
]

log = logging.getLogger("tether.runtime")

Cursor = AsyncCursor[DictRow]

_FINISH_THREAD = """
UPDATE tether_threads
   SET active_run_id = NULL,
       status = CASE WHEN EXISTS (SELECT 1 FROM tether_runs p
                                   WHERE p.thread_id = %(thread)s AND p.status = 'pending')
                     THEN 'busy' ELSE %(thread_status)s END,
       state_values = CASE WHEN %(keep)s THEN state_values ELSE %(values)s END,
       interrupts = COALESCE(%(interrupts)s::jsonb, interrupts),
       error = %(thread_error)s, updated_at = now(), state_updated_at = now()
 WHERE thread_id = %(thread)s AND active_run_id = %(run)s"""
_FINISH_RUN = """
UPDATE tether_runs
   SET status = %(status)s, worker_id = NULL, lease_expires_at = NULL,
       waiting_on = %(waiting_on)s::jsonb, error = %(error)s, ended_reason = %(reason)s,
       ended_at = CASE WHEN %(status)s = 'interrupted' THEN NULL ELSE now() END,
       input = NULL, input_kind = 'none',
       last_seq = last_seq + %(bump)s, updated_at = now()
 WHERE run_id = %(run)s AND fence = %(fence)s AND status = 'running'
RETURNING *"""
_RELEASE_THREAD = """
UPDATE tether_threads SET active_run_id = NULL, updated_at = now()
 WHERE thread_id = %(thread)s AND active_run_id = %(run)s"""
_RELEASE_RUN = """
UPDATE tether_runs
   SET status = 'pending', worker_id = NULL, lease_expires_at = NULL,
       available_at = now(), attempt = attempt - %(refund)s,
       last_seq = last_seq + 1, updated_at = now()
 WHERE run_id = %(run)s AND fence = %(fence)s AND status = 'running'
RETURNING *"""
_BUMP_FENCED = """
UPDATE tether_runs SET last_seq = last_seq + %(n)s
 WHERE run_id = %(run)s AND fence = %(fence)s AND status = 'running'
RETURNING last_seq - %(n)s AS base"""
_INSERT_EVENTS = """
INSERT INTO tether_run_events (run_id, seq, kind, ns, data, fence, worker_id)
SELECT %(run)s, %(base)s + e.ord, e.kind, e.ns, e.data, %(fence)s, %(worker)s
  FROM unnest(%(kinds)s::text[], %(nss)s::text[], %(datas)s::text[])
       WITH ORDINALITY AS e(kind, ns, data, ord)"""
# The common case of an append (no keys, no run-scoped role) as one statement in its
# own transaction: reserve the seqs, insert, wake the followers. No rows: the fence
# moved on, and the CTE's INSERT (which reads the UPDATE's rows) inserted nothing.
_APPEND_ONE_STATEMENT = """
WITH bumped AS (
    UPDATE tether_runs SET last_seq = last_seq + %(n)s
     WHERE run_id = %(run)s AND fence = %(fence)s AND status = 'running'
    RETURNING last_seq - %(n)s AS base
), added AS (
    INSERT INTO tether_run_events (run_id, seq, kind, ns, data, fence, worker_id)
    SELECT %(run)s, b.base + e.ord, e.kind, e.ns, e.data, %(fence)s, %(worker)s
      FROM bumped b,
           unnest(%(kinds)s::text[], %(nss)s::text[], %(datas)s::text[])
           WITH ORDINALITY AS e(kind, ns, data, ord)
)
SELECT base, pg_notify('tether_events', %(run)s) FROM bumped"""
# The common case of a finish (no keys, no run-scoped role) as one statement: the run's
# outcome, its thread freed, its last events and ENDED's notifications. Every part reads
# the run's UPDATE, so a fence that moved on (no row) changes and sends nothing.
_FINISH_ONE_STATEMENT = f"""
WITH finished AS ({_FINISH_RUN}
), thread AS ({_FINISH_THREAD} AND EXISTS (SELECT 1 FROM finished)
), added AS (
    INSERT INTO tether_run_events (run_id, seq, kind, ns, data, fence, worker_id)
    SELECT f.run_id, f.last_seq - %(bump)s + e.ord, e.kind, e.ns, e.data, f.fence, %(worker)s
      FROM finished f,
           unnest(%(kinds)s::text[], %(nss)s::text[], %(datas)s::text[])
           WITH ORDINALITY AS e(kind, ns, data, ord)
)
SELECT f.*, pg_notify('tether_events', f.run_id) AS notified_events,
       pg_notify('tether_ended', f.run_id) AS notified_ended,
       (SELECT pg_notify('tether_runs', p.graph_id) FROM tether_runs p
         WHERE p.thread_id = f.thread_id AND p.status = 'pending'
         ORDER BY p.seq LIMIT 1) AS notified_claimers
  FROM finished f"""
# A run stopped: its waiters look (``tether_ended``), its followers read its last event,
# and claimers look only when its thread has a run queued behind it (the thread is free
# now); a run on a thread of its own frees nothing another run waits for.
ENDED = """
SELECT pg_notify('tether_events', %(run)s), pg_notify('tether_ended', %(run)s),
       (SELECT pg_notify('tether_runs', p.graph_id) FROM tether_runs p
         WHERE p.thread_id = %(thread)s AND p.status = 'pending' ORDER BY p.seq LIMIT 1)"""
_HEARTBEAT = """
UPDATE tether_runs
   SET lease_expires_at = now() + make_interval(secs => %(lease)s)
 WHERE worker_id = %(worker)s AND status = 'running'
RETURNING run_id, fence, cancel_action, cancel_reason, deadline_at"""


def new_secret() -> str:
    """A fresh lease secret: 32 random bytes as 64 hex digits."""
    return secrets.token_hex(32)


def lease_hash(secret: str) -> bytes:
    """What ``tether_leases`` stores of ``secret``: the SHA-256 of its text."""
    return hashlib.sha256(secret.encode()).digest()


def _event_columns(events: Sequence[NewEvent], datas: list[str]) -> dict[str, list[str]]:
    """The ``kinds``, ``nss`` and ``datas`` arrays the event ``INSERT``s unnest."""
    return {"kinds": [e.kind for e in events], "nss": [e.ns for e in events], "datas": datas}


async def insert_events(
    cur: Cursor,
    run_id: str,
    base: int,
    events: Sequence[NewEvent],
    sealer: Sealer,
    *,
    fence: int | None = None,
    worker: str | None = None,
) -> None:
    """Insert ``events`` as seqs ``base + 1 …`` (the caller reserved them on the run row),
    their data sealed for each seq."""
    if not events:
        return
    await cur.execute(
        _INSERT_EVENTS,
        {
            "run": run_id,
            "base": base,
            "fence": fence,
            "worker": worker,
            **_event_columns(
                events,
                [
                    sealer.seal(e.data, "tether.event", run_id, str(base + i))
                    for i, e in enumerate(events, start=1)
                ],
            ),
        },
    )


_CLAIM_LEASED = """SELECT (c.run).*, c.previous_worker, c.slot
  FROM tether_claim_{which}_leased(%(worker)s, %(graphs)s, %(limit)s, %(lease)s, %(hashes)s) c"""
_ENTER_LEASE = """SELECT tether_assert_lease(%(run)s, %(fence)s, %(secret)s),
       set_config('tether.run_scope', %(scope)s, true)"""
_LEASE_REFUSED = "TL001"  # tether_assert_lease: the lease is not live, or not this secret
_HEARTBEAT_LEASED = """SELECT * FROM tether_lease_heartbeat(%(worker)s, %(lease)s,
                                                   %(runs)s, %(secrets)s)"""


class PostgresWorkerPlane:
    """Worker-plane methods of ``PostgresRunStore`` (needs ``self._pool``).

    Connected as a run-scoped worker role (:attr:`scoped`), the same methods
    claim through the lease functions of :mod:`tether.runtime.worker_leases`
    (each claim gets a fresh secret, kept in :attr:`_leases` for heartbeats
    and verifications) and start every write transaction for a held run with
    the lease check and the run scope, which the role's row-level policies
    require; the statements that follow are the unrestricted path's.
    """

    @property
    def rows(self) -> Dialect:
        raise NotImplementedError

    _pool: AsyncConnectionPool[Any]
    scoped: bool = False
    """Whether the store connects as a run-scoped worker role (``tether workers grant``)."""
    _leases: dict[str, tuple[int, str]]
    """run_id -> (fence, secret) of the claims this store made as a scoped role."""

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[Cursor]:
        """A cursor inside one transaction: committed on exit, rolled back on error."""
        async with self._conn() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    @asynccontextmanager
    async def _queued_tx(self) -> AsyncIterator[Cursor]:
        """A transaction queued in one pipeline: a round trip per fetch, and one to commit.

        For the writes every run makes (its creation, claim, events and
        outcome). A statement's error comes at the next fetch or at the end of
        the block, not from its ``execute``. Before PostgreSQL 17 (no
        ``transaction_timeout``) it is a plain transaction: only between round
        trips is a stopped client "idle in transaction", which frees its locks.
        """
        async with self._conn() as conn:
            if conn.info.server_version < 170000:
                async with conn.transaction(), conn.cursor() as cur:
                    yield cur
                return
            async with conn.cursor() as cur, queued_transaction(cur):
                yield cur

    @asynccontextmanager
    async def _held_tx(self, hold: Hold) -> AsyncIterator[Cursor]:
        """A :meth:`_queued_tx` for ``hold``'s run: a refused lease (a scoped role's
        :meth:`_enter`) is :class:`FenceLostError` wherever it comes."""
        try:
            async with self._queued_tx() as cur:
                yield cur
        except psycopg.Error as exc:
            if exc.sqlstate == _LEASE_REFUSED:
                raise FenceLostError(hold.run_id, hold.fence) from exc
            raise

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[AsyncConnection[DictRow]]:
        """A pooled connection; a missing table means ``setup()`` never ran."""
        try:
            async with self._pool.connection() as conn:
                yield conn
        except psycopg.errors.UndefinedTable as exc:
            raise RuntimeSchemaError(MISSING_SCHEMA) from exc

    async def register_worker(self, worker: WorkerInfo) -> None:
        async with self._tx() as cur:
            await cur.execute(
                """INSERT INTO tether_workers (worker_id, host, pid, graphs, concurrency)
                   VALUES (%s, %s, %s, %s::jsonb, %s)
                   ON CONFLICT (worker_id) DO UPDATE
                      SET graphs = excluded.graphs, concurrency = excluded.concurrency,
                          last_heartbeat = now(), stopping = false""",
                (
                    worker.worker_id,
                    worker.host,
                    worker.pid,
                    dumps(list(worker.graphs)),
                    worker.concurrency,
                ),
            )

    async def unregister_worker(self, worker_id: str) -> None:
        async with self._tx() as cur:
            await cur.execute("DELETE FROM tether_workers WHERE worker_id = %s", (worker_id,))

    async def claim(
        self, worker_id: str, *, graphs: Sequence[str], limit: int, lease: float
    ) -> builtins.list[Claim]:
        return await self._claim("pending", worker_id, graphs, limit, lease)

    async def claim_expired(
        self, worker_id: str, *, graphs: Sequence[str], limit: int, lease: float
    ) -> builtins.list[Claim]:
        return await self._claim("expired", worker_id, graphs, limit, lease)

    async def _claim(
        self, which: str, worker: str, graphs: Sequence[str], limit: int, lease: float
    ) -> builtins.list[Claim]:
        if limit <= 0 or not graphs:
            return []
        params: dict[str, Any] = {
            "graphs": list(graphs),
            "limit": limit,
            "worker": worker,
            "lease": lease,
        }
        secrets_ = [new_secret() for _ in range(limit)] if self.scoped else []
        claims: builtins.list[Claim] = []
        async with self._queued_tx() as cur:
            if self.scoped:
                params["hashes"] = [lease_hash(secret) for secret in secrets_]
                await cur.execute(_CLAIM_LEASED.format(which=which), params)
            else:
                sql = CLAIM_EXPIRED if which == "expired" else CLAIM_PENDING
                await cur.execute(sql, params)
            rows = await cur.fetchall()
            if self.scoped and rows:
                await cur.execute(
                    "SELECT pg_notify('tether_events', r) FROM unnest(%s::text[]) r",
                    ([row["run_id"] for row in rows],),
                )
            for row in rows:
                secret = secrets_[int(row["slot"]) - 1] if self.scoped else ""
                try:
                    run = self.rows.run(row)
                except EncryptionError as exc:
                    run_id = row["run_id"]
                    hold = Hold(run_id, row["thread_id"], worker, int(row["fence"]), secret)
                    log.error(
                        "worker %s: run %s cannot be read; failing it: %s", worker, run_id, exc
                    )
                    await self._finish_row(cur, hold, unreadable(run_id, exc))
                    continue
                if run.attempt > run.max_attempts:
                    hold = Hold(run.run_id, run.thread_id, worker, run.fence, secret)
                    await self._finish_in(cur, hold, attempts_exceeded(run))
                else:
                    claims.append(Claim(run, row["previous_worker"], secret))
        # Once committed (a queued transaction reports a late error at its end).
        for claim in claims:
            if claim.secret:
                self._leases[claim.run.run_id] = (claim.run.fence, claim.secret)
        return claims

    async def _enter(self, cur: Cursor, hold: Hold) -> None:
        """A scoped role: check ``hold``'s lease and name its run as the transaction's scope.

        The unrestricted path sends nothing (its statements name the fence).
        Raises :class:`FenceLostError` when the lease is not live (or the
        secret is wrong).
        """
        if not hold.secret:
            return
        params = {
            "run": hold.run_id,
            "fence": hold.fence,
            "secret": hold.secret,
            "scope": f"{hold.run_id}:{hold.fence}:{hold.secret}",
        }
        try:
            await cur.execute(_ENTER_LEASE, params)
        except psycopg.Error as exc:
            if exc.sqlstate == _LEASE_REFUSED:
                raise FenceLostError(hold.run_id, hold.fence) from exc
            raise

    async def heartbeat(self, worker_id: str, *, lease: float) -> builtins.list[Held]:
        async with self._tx() as cur:
            if self.scoped:
                held = list(self._leases.items())
                await cur.execute(
                    _HEARTBEAT_LEASED,
                    {
                        "worker": worker_id,
                        "lease": lease,
                        "runs": [run_id for run_id, _ in held],
                        "secrets": [secret for _, (_, secret) in held],
                    },
                )
            else:
                await cur.execute(_HEARTBEAT, {"worker": worker_id, "lease": lease})
            rows = await cur.fetchall()
            await cur.execute(
                "UPDATE tether_workers SET last_heartbeat = now() WHERE worker_id = %s",
                (worker_id,),
            )
        return [
            Held(
                r["run_id"],
                int(r["fence"]),
                r["cancel_action"],
                r["cancel_reason"],
                POSTGRES.maybe_time(r["deadline_at"]),
            )
            for r in rows
        ]

    async def release(self, hold: Hold, *, reason: str = "", retry: bool = False) -> Run:
        params = {"thread": hold.thread_id, "run": hold.run_id, "fence": hold.fence}
        async with self._ending(hold), self._tx() as cur:
            await self._enter(cur, hold)
            await cur.execute(_RELEASE_THREAD, params)
            await cur.execute(_RELEASE_RUN, {**params, "refund": 0 if retry else 1})
            row = await self._fenced_row(cur, hold)
            data = {"reason": reason, "retry": retry, "attempt": int(row["attempt"])}
            await insert_events(
                cur,
                hold.run_id,
                int(row["last_seq"]) - 1,
                [NewEvent("run.released", data)],
                self.rows.sealer,
                fence=hold.fence,
                worker=hold.worker_id,
            )
            await cur.execute(
                "SELECT pg_notify('tether_runs', %s), pg_notify('tether_events', %s)",
                (row["graph_id"], hold.run_id),
            )
        return self.rows.run(row)

    async def finish(self, hold: Hold, outcome: Outcome, events: Sequence[NewEvent] = ()) -> Run:
        if self._in_one_statement(hold):
            async with self._ending(hold):
                return await self._finish_in_one_statement(hold, outcome, events)
        async with self._ending(hold), self._held_tx(hold) as cur:
            return await self._finish_in(cur, hold, outcome, events)

    async def _finish_in_one_statement(
        self, hold: Hold, outcome: Outcome, events: Sequence[NewEvent]
    ) -> Run:
        """:meth:`finish` as one statement (where :meth:`_in_one_statement`)."""
        written = [*events, NewEvent("run.finished", finished_data(outcome))]
        params = {
            **finish_params(hold, outcome, self.rows.sealer),
            "bump": len(written),
            "worker": hold.worker_id,
            **_event_columns(written, [dumps(e.data) for e in written]),
        }
        async with self._conn() as conn:
            cur = await conn.execute(_FINISH_ONE_STATEMENT, params)
            return self.rows.run(await self._fenced_row(cur, hold))

    @asynccontextmanager
    async def _ending(self, hold: Hold) -> AsyncIterator[None]:
        """Stop heartbeating ``hold``'s claim once the block ended it or found it lost; any
        other error keeps it renewed, for the caller to try again."""
        try:
            yield
        except FenceLostError:
            self._forget(hold)
            raise
        self._forget(hold)

    def _forget(self, hold: Hold) -> None:
        if hold.secret and self._leases.get(hold.run_id, (0, ""))[1] == hold.secret:
            del self._leases[hold.run_id]

    async def _finish_in(
        self, cur: Cursor, hold: Hold, outcome: Outcome, events: Sequence[NewEvent] = ()
    ) -> Run:
        return self.rows.run(await self._finish_row(cur, hold, outcome, events))

    async def _finish_row(
        self, cur: Cursor, hold: Hold, outcome: Outcome, events: Sequence[NewEvent] = ()
    ) -> Any:
        """:meth:`_finish_in`, answering the run's row as stored (not opened)."""
        await self._enter(cur, hold)
        # Notifications go out at commit; ENDED reads the thread's queue while the lease
        # still scopes a worker role to it (once the run has ended, the role sees no row).
        await cur.execute(ENDED, {"run": hold.run_id, "thread": hold.thread_id})
        written = [*events, NewEvent("run.finished", finished_data(outcome))]
        params = {**finish_params(hold, outcome, self.rows.sealer), "bump": len(written)}
        await cur.execute(_FINISH_THREAD, params)
        await cur.execute(_FINISH_RUN, params)
        row = await self._fenced_row(cur, hold)
        await insert_events(
            cur,
            hold.run_id,
            int(row["last_seq"]) - len(written),
            written,
            self.rows.sealer,
            fence=hold.fence,
            worker=hold.worker_id,
        )
        return row

    async def append_events(self, hold: Hold, events: Sequence[NewEvent]) -> int:
        if events and self._in_one_statement(hold):
            return await self._append_in_one_statement(hold, events)
        async with self._held_tx(hold) as cur:
            await self._enter(cur, hold)
            await cur.execute(
                _BUMP_FENCED, {"n": len(events), "run": hold.run_id, "fence": hold.fence}
            )
            base = int((await self._fenced_row(cur, hold))["base"])
            await insert_events(
                cur,
                hold.run_id,
                base,
                events,
                self.rows.sealer,
                fence=hold.fence,
                worker=hold.worker_id,
            )
            if events:
                await cur.execute("SELECT pg_notify('tether_events', %s)", (hold.run_id,))
        return base + len(events)

    def _in_one_statement(self, hold: Hold) -> bool:
        """Whether ``hold``'s events and finish may be written as one statement each: no
        value is sealed (a sealed event is bound to its seq, which the writer must read
        before it seals) and the role is not run-scoped (whose lease check is a
        statement of its own)."""
        return not hold.secret and not self.rows.sealer.enabled

    async def _append_in_one_statement(self, hold: Hold, events: Sequence[NewEvent]) -> int:
        """:meth:`append_events` as one statement (one round trip, nothing to commit)."""
        async with self._conn() as conn:
            cur = await conn.execute(
                _APPEND_ONE_STATEMENT,
                {
                    "n": len(events),
                    "run": hold.run_id,
                    "fence": hold.fence,
                    "worker": hold.worker_id,
                    **_event_columns(events, [dumps(e.data) for e in events]),
                },
            )
            base = int((await self._fenced_row(cur, hold))["base"])
        return base + len(events)

    async def verify(self, run_id: str, fence: int) -> bool:
        async with self._conn() as conn:
            if self.scoped:
                held = self._leases.get(run_id)
                if held is None or held[0] != fence:
                    return False
                cur = await conn.execute(
                    "SELECT tether_lease_valid(%s, %s, %s) AS valid", (run_id, fence, held[1])
                )
                row = await cur.fetchone()
                return bool(row and row["valid"])
            cur = await conn.execute(
                "SELECT 1 FROM tether_runs WHERE run_id = %s AND fence = %s AND status = 'running'",
                (run_id, fence),
            )
            return await cur.fetchone() is not None

    @staticmethod
    async def _fenced_row(cur: Cursor, hold: Hold) -> DictRow:
        """The row a fenced UPDATE returned; none: the fence moved on (the caller's
        transaction rolls back as the error leaves it)."""
        row = await cur.fetchone()
        if row is None:
            raise FenceLostError(hold.run_id, hold.fence)
        return row
