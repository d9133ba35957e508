"""Wake-ups: "look again" signals for workers and readers, never the data itself.

The run store is the truth; a notification only says that something may have
changed, so a missed one costs at most a poll interval and a spurious one costs
a read. Four channels:

* ``runs``: a run became claimable (created, released, resumed, a thread with a
  pending run freed);
* ``events``: a run appended events (payload: the run id);
* ``ended``: a run stopped: finished, interrupted, failed, cancelled, timed out
  (payload: the run id). A waiter for the outcome listens here, not on
  ``events``: a run appends a batch of events every few milliseconds, and each
  would cost the waiter a read for nothing;
* ``control``: a held run was asked to stop (payload: the run id).

PostgreSQL delivers them with ``LISTEN``/``NOTIFY`` on one dedicated autocommit
connection per process (reconnecting with backoff, and waking everyone after a
reconnect, since notifications sent while disconnected are lost). SQLite has no
notifications: a connection polls ``PRAGMA data_version``, which changes
whenever another connection commits, and wakes everyone when it does. Both also
take :meth:`Notifier.publish_local` for wakes inside one process.

A waiter subscribes *before* reading the store and waits *after*: a signal sent
between the read and the wait is then not lost (:meth:`Notifier.subscribe`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

__all__ = [
    "CHANNELS",
    "Channel",
    "Notifier",
    "PostgresNotifier",
    "SqliteNotifier",
    "Subscription",
]

log = logging.getLogger("tether.runtime")

Channel = Literal["runs", "events", "ended", "control"]
CHANNELS: tuple[Channel, ...] = ("runs", "events", "ended", "control")
# The Postgres channel names; the run store's statements NOTIFY these.
PG_CHANNELS: dict[str, Channel] = {
    "tether_runs": "runs",
    "tether_events": "events",
    "tether_ended": "ended",
    "tether_control": "control",
}


class Subscription:
    """One waiter's view of a channel: set when a signal arrives after subscribing."""

    def __init__(self, channel: Channel, key: str | None) -> None:
        self.channel = channel
        self.key = key
        self._event = asyncio.Event()
        self.payloads: list[str] = []

    def _signal(self, payload: str | None) -> None:
        if payload is not None:
            self.payloads.append(payload)
        self._event.set()

    async def wait(self, timeout: float | None) -> bool:  # noqa: ASYNC109
        """Wait for a signal; True if one came, False on timeout. Re-arms afterwards."""
        try:
            if timeout is None:
                await self._event.wait()
            else:  # not wait_for: on 3.11 it can swallow a cancel that races the event
                async with asyncio.timeout(timeout):
                    await self._event.wait()
        except TimeoutError:
            return False
        self._event.clear()
        return True


class Notifier:
    """Fan-out of signals to subscriptions in this process (the shared base)."""

    def __init__(self) -> None:
        self._subs: set[Subscription] = set()

    @asynccontextmanager
    async def subscribe(
        self, channel: Channel, key: str | None = None
    ) -> AsyncIterator[Subscription]:
        """Signals on ``channel`` (only those whose payload is ``key``, when given)."""
        sub = Subscription(channel, key)
        self._subs.add(sub)
        try:
            yield sub
        finally:
            self._subs.discard(sub)

    def publish_local(self, channel: Channel, payload: str | None = None) -> None:
        """Wake this process's subscribers of ``channel`` (``payload`` None wakes all keys)."""
        for sub in list(self._subs):
            if sub.channel != channel:
                continue
            if payload is None or sub.key is None or sub.key == payload:
                sub._signal(payload)

    def wake_all(self) -> None:
        """Wake every subscriber: after a gap in delivery, everyone must look again."""
        for sub in list(self._subs):
            sub._signal(None)

    async def start(self) -> None:
        """Begin delivering signals from other processes (no-op for the base)."""

    async def aclose(self) -> None:
        """Stop delivering; subscribers are woken so none waits forever."""
        self.wake_all()


class PostgresNotifier(Notifier):
    """``LISTEN`` on one dedicated autocommit connection, reconnecting with backoff."""

    def __init__(self, conninfo: str) -> None:
        super().__init__()
        self._conninfo = conninfo
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name="tether-notifier")
            await asyncio.wait_for(self._ready.wait(), 30)

    async def _listen(self) -> None:
        import psycopg

        backoff = 0.05
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
            except (OSError, psycopg.Error) as error:
                log.warning("notifier: cannot connect (%s); retrying in %.2fs", error, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            try:
                async with conn:
                    for name in PG_CHANNELS:
                        await conn.execute(f"LISTEN {name}")
                    backoff = 0.05
                    self._ready.set()
                    self.wake_all()  # anything sent while we were away is lost
                    while True:
                        async for note in conn.notifies(timeout=30):
                            channel = PG_CHANNELS.get(note.channel)
                            if channel is not None:
                                self.publish_local(channel, note.payload or None)
                        await conn.execute("SELECT 1")  # keeps a dead peer from going unseen
            except (OSError, psycopg.Error) as error:
                log.warning("notifier: connection lost (%s); reconnecting", error)
                await asyncio.sleep(backoff)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await super().aclose()


class SqliteNotifier(Notifier):
    """Polls ``PRAGMA data_version`` (changes when another connection commits)."""

    def __init__(self, path: str, *, interval: float = 0.025) -> None:
        super().__init__()
        self._path = path
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is None:
            conn = await asyncio.to_thread(self._connect)
            self._task = asyncio.create_task(self._poll(conn), name="tether-notifier")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, check_same_thread=False, timeout=30)
        conn.execute("PRAGMA busy_timeout = 30000")
        return conn

    async def _poll(self, conn: sqlite3.Connection) -> None:
        def version() -> Any:
            return conn.execute("PRAGMA data_version").fetchone()[0]

        try:
            last = version()
            while True:
                await asyncio.sleep(self._interval)
                now = version()
                if now != last:
                    last = now
                    self.wake_all()
        finally:
            conn.close()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await super().aclose()
