"""Decoding rows into the runtime's records, for both dialects.

The two backends differ only in how a JSON column and a time come back:
PostgreSQL returns ``jsonb`` decoded and ``timestamptz`` as ``datetime``;
SQLite returns JSON text and REAL unix seconds. A :class:`Dialect` holds those
two conversions; everything else is shared. Columns that may hold sealed values
(``input``, ``state_values``, ``error``, event ``data``) are text in both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from tether.runtime.models import Assistant, Cron, Run, RunEvent, Thread, WaitingOn
from tether.runtime.store.encoding import loads
from tether.runtime.store.sealing import PLAIN, SYSTEM_EVENTS, Sealer

__all__ = ["POSTGRES", "SQLITE", "Dialect", "Row"]


class Row(Protocol):
    """A row read by column name (psycopg's dict rows, ``sqlite3.Row``)."""

    def __getitem__(self, key: str, /) -> Any: ...


def _pg_time(value: Any) -> datetime | None:
    if value is None:
        return None
    assert isinstance(value, datetime)
    return value.astimezone(UTC)


def _sqlite_time(value: Any) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(float(value), UTC)


def _sqlite_json(value: Any) -> Any:
    return loads(value) if isinstance(value, str | bytes) else value


@dataclass(frozen=True)
class Dialect:
    """How one backend returns JSON columns and times, and how private values are opened."""

    json: Callable[[Any], Any]
    maybe_time: Callable[[Any], datetime | None]
    sealer: Sealer = PLAIN

    def sealed_by(self, sealer: Sealer) -> Dialect:
        """This dialect, opening private values with ``sealer``."""
        return Dialect(self.json, self.maybe_time, sealer)

    def time(self, value: Any) -> datetime:
        moment = self.maybe_time(value)
        assert moment is not None
        return moment

    def run(self, row: Row) -> Run:
        waiting = self.json(row["waiting_on"]) or []
        return Run(
            run_id=row["run_id"],
            seq=int(row["seq"]),
            tenant_id=row["tenant_id"],
            thread_id=row["thread_id"],
            assistant_id=row["assistant_id"],
            graph_id=row["graph_id"],
            status=row["status"],
            multitask_strategy=row["multitask_strategy"],
            kwargs=self.sealer.open_json(
                self.json(row["kwargs"]), "tether.run", row["run_id"], "kwargs", clear_ok=True
            ),
            input=self.sealer.open(row["input"], "tether.run", row["run_id"], "input"),
            input_kind=row["input_kind"],
            metadata=self.json(row["metadata"]),
            attempt=int(row["attempt"]),
            max_attempts=int(row["max_attempts"]),
            resumes=int(row["resumes"]),
            fence=int(row["fence"]),
            worker_id=row["worker_id"],
            lease_expires_at=self.maybe_time(row["lease_expires_at"]),
            available_at=self.time(row["available_at"]),
            deadline_at=self.maybe_time(row["deadline_at"]),
            step_timeout_s=row["step_timeout_s"],
            cancel_action=row["cancel_action"],
            cancel_reason=row["cancel_reason"],
            cancel_requested_at=self.maybe_time(row["cancel_requested_at"]),
            ended_reason=row["ended_reason"],
            waiting_on=tuple(WaitingOn.from_dict(w) for w in waiting),
            error=self.sealer.open(row["error"], "tether.run", row["run_id"], "error"),
            last_seq=int(row["last_seq"]),
            created_at=self.time(row["created_at"]),
            updated_at=self.time(row["updated_at"]),
            started_at=self.maybe_time(row["started_at"]),
            ended_at=self.maybe_time(row["ended_at"]),
        )

    def thread(self, row: Row) -> Thread:
        thread_id = row["thread_id"]
        return Thread(
            thread_id=thread_id,
            tenant_id=row["tenant_id"],
            status=row["status"],
            metadata=self.json(row["metadata"]),
            config=self.json(row["config"]),
            values=self.sealer.open(row["state_values"], "tether.thread", thread_id, "values"),
            interrupts=self.sealer.open_json(
                self.json(row["interrupts"]), "tether.thread", thread_id, "interrupts"
            ),
            error=self.sealer.open(row["error"], "tether.thread", thread_id, "error"),
            active_run_id=row["active_run_id"],
            temporary=bool(row["temporary"]),
            created_at=self.time(row["created_at"]),
            updated_at=self.time(row["updated_at"]),
            state_updated_at=self.time(row["state_updated_at"]),
        )

    def assistant(self, row: Row) -> Assistant:
        return Assistant(
            assistant_id=row["assistant_id"],
            tenant_id=row["tenant_id"],
            graph_id=row["graph_id"],
            name=row["name"],
            description=row["description"],
            config=self.json(row["config"]),
            context=self.json(row["context"]),
            metadata=self.json(row["metadata"]),
            version=int(row["version"]),
            created_at=self.time(row["created_at"]),
            updated_at=self.time(row["updated_at"]),
        )

    def cron(self, row: Row) -> Cron:
        return Cron(
            cron_id=row["cron_id"],
            tenant_id=row["tenant_id"],
            assistant_id=row["assistant_id"],
            thread_id=row["thread_id"],
            schedule=row["schedule"],
            timezone=row["timezone"],
            payload=self.sealer.open_json(
                self.json(row["payload"]), "tether.cron", row["cron_id"], "payload", clear_ok=True
            ),
            metadata=self.json(row["metadata"]),
            on_run_completed=row["on_run_completed"],
            enabled=bool(row["enabled"]),
            end_time=self.maybe_time(row["end_time"]),
            user_id=row["user_id"],
            next_run_at=self.time(row["next_run_at"]),
            created_at=self.time(row["created_at"]),
            updated_at=self.time(row["updated_at"]),
        )

    def event(self, row: Row) -> RunEvent:
        return RunEvent(
            run_id=row["run_id"],
            seq=int(row["seq"]),
            kind=row["kind"],
            data=self.sealer.open(
                row["data"],
                "tether.event",
                row["run_id"],
                str(row["seq"]),
                clear_ok=row["kind"] in SYSTEM_EVENTS,
            ),
            ns=row["ns"],
            fence=None if row["fence"] is None else int(row["fence"]),
            worker_id=row["worker_id"],
            created_at=self.maybe_time(row["created_at"]),
        )


POSTGRES = Dialect(json=lambda value: value, maybe_time=_pg_time)
SQLITE = Dialect(json=_sqlite_json, maybe_time=_sqlite_time)
