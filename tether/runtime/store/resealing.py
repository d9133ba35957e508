"""Re-sealing the run store's private values under the active key (``tether keys rotate``).

Every sealed column (:mod:`~tether.runtime.store.sealing`) is walked in key
order, in batches; a value sealed under an older key (or envelope version) is
opened and sealed again under the active one, with the same associated data.
Each update names the value it replaces, so a row a worker rewrote in the
meantime is left alone (it is sealed under the active key already). Values in
clear are counted, not encrypted: migrating a store written without a key is
done by running with ``TETHER_ENCRYPTION_ALLOW_PLAINTEXT=1`` until they are
rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.runtime.store.sealing import SEALED_PREFIX, SYSTEM_EVENTS, Sealer

__all__ = ["SEALED_COLUMNS", "ResealCounts", "SealedColumn", "reseal"]

Read = Callable[[str, Sequence[Any]], Awaitable[Sequence[Any]]]
Execute = Callable[[str, Sequence[Any]], Awaitable[int]]


@dataclass(frozen=True)
class SealedColumn:
    """A column holding sealed values, and what each value is bound to."""

    table: str
    keys: tuple[str, ...]
    column: str
    domain: str
    label: str | None  # the last associated-data part; None: the row's second key (seq)
    json_column: bool = False  # jsonb on PostgreSQL: the envelope is a JSON string
    system_kinds: bool = False  # events of SYSTEM_EVENTS kinds may be in clear

    def where(self, row: Any) -> tuple[str, ...]:
        last = self.label if self.label is not None else str(row[self.keys[1]])
        return (self.domain, str(row[self.keys[0]]), last)


SEALED_COLUMNS: tuple[SealedColumn, ...] = (
    SealedColumn("tether_runs", ("run_id",), "input", "tether.run", "input"),
    SealedColumn("tether_runs", ("run_id",), "error", "tether.run", "error"),
    SealedColumn("tether_runs", ("run_id",), "kwargs", "tether.run", "kwargs", True),
    SealedColumn("tether_crons", ("cron_id",), "payload", "tether.cron", "payload", True),
    SealedColumn("tether_threads", ("thread_id",), "state_values", "tether.thread", "values"),
    SealedColumn("tether_threads", ("thread_id",), "error", "tether.thread", "error"),
    SealedColumn(
        "tether_threads", ("thread_id",), "interrupts", "tether.thread", "interrupts", True
    ),
    SealedColumn(
        "tether_run_events",
        ("run_id", "seq"),
        "data",
        "tether.event",
        None,
        system_kinds=True,
    ),
)


@dataclass
class ResealCounts:
    """What a pass over the run store did."""

    rewrapped: int = 0
    current: int = 0
    plaintext: int = 0


async def reseal(
    sealer: Sealer, read: Read, execute: Execute, mark: str, *, batch: int = 500
) -> ResealCounts:
    """Re-seal every sealed value under ``sealer``'s active key (see the module doc)."""
    one = _Pass(sealer, execute, mark)
    for col in SEALED_COLUMNS:
        keys = ", ".join(col.keys)
        after: tuple[Any, ...] | None = None
        while True:
            page = f"({keys}) > ({', '.join([mark] * len(col.keys))}) AND " if after else ""
            rows = await read(
                f"SELECT {keys}, {'kind' if col.system_kinds else 'NULL'} AS kind, "
                f"CAST({col.column} AS TEXT) AS stored FROM {col.table} "
                f"WHERE {page}{col.column} IS NOT NULL ORDER BY {keys} LIMIT {int(batch)}",
                list(after or ()),
            )
            for row in rows:
                await one.row(col, row)
            if len(rows) < batch:
                break
            after = tuple(rows[-1][k] for k in col.keys)
    return one.counts


@dataclass
class _Pass:
    sealer: Sealer
    execute: Execute
    mark: str
    counts: ResealCounts = field(default_factory=ResealCounts)

    async def row(self, col: SealedColumn, row: Any) -> None:
        stored: str = row["stored"]
        envelope = json.loads(stored) if col.json_column else stored
        if not isinstance(envelope, str) or not envelope.startswith(SEALED_PREFIX):
            if envelope not in (None, {}, []) and row["kind"] not in SYSTEM_EVENTS:
                self.counts.plaintext += 1
            return
        fresh = self.sealer.rewrap(envelope, *col.where(row))
        if fresh is None:
            self.counts.current += 1
            return
        new = json.dumps(fresh) if col.json_column else fresh
        mark = self.mark
        value = f"CAST({mark} AS jsonb)" if col.json_column and mark == "%s" else mark
        match = " AND ".join(f"{k} = {mark}" for k in col.keys)
        self.counts.rewrapped += await self.execute(
            f"UPDATE {col.table} SET {col.column} = {value} "
            f"WHERE {match} AND CAST({col.column} AS TEXT) = {mark}",
            [new, *(row[k] for k in col.keys), stored],
        )
