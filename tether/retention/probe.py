"""Is there a run store to sweep? Checked before ``tether retention run`` opens one.

The sweep finds threads through the run store's thread-activity index, which
tether's runtime keeps (``tether serve``, ``tether worker``, ``Runtime``). A
database that only a checkpointer wrote (LangGraph's ``checkpoints`` tables, a
library user's ``tether.open_checkpointer(url)`` without the runtime) has no such
index, and opening it as a run store would create an empty one and sweep
nothing. :func:`check_run_store` refuses both cases with a message saying so,
instead of reporting "0 examined".
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tether.checkpointing import parse_url, redact
from tether.retention.errors import RetentionError

__all__ = ["NoRunStoreError", "check_run_store"]

_RUN_STORE = "tether_threads"
_CHECKPOINTS = "checkpoints"


class NoRunStoreError(RetentionError):
    """The database holds no tether run store (maybe only a checkpointer's tables)."""


def _message(url: str, checkpoints: bool, doing: str) -> str:
    where = redact(url)
    if checkpoints:
        return (
            f"{where} holds LangGraph checkpoints but no tether run store (no {_RUN_STORE} "
            f"table): {doing} finds threads through the run store, which tether serve, tether "
            "worker and tether.runtime.Runtime keep; threads kept only by a checkpointer are "
            "not tracked. Point --url at the run store (and --checkpoints-url at this "
            "database if the checkpoints live apart), or erase such a thread by its id with "
            "`tether erase --thread T`"
        )
    return (
        f"{where} holds no tether run store (no {_RUN_STORE} table), so {doing} would find "
        "nothing. Point --url at the database tether serve and tether worker use"
    )


def _sqlite_tables(path: str) -> set[str]:
    if path == ":memory:" or not Path(path).is_file():
        return set()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        db.close()
    return {str(name) for (name,) in rows}


async def _postgres_tables(url: str) -> set[str]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, connect_timeout=5) as conn:
        cursor = await conn.execute(
            "SELECT %s FROM (SELECT to_regclass(%s) AS t) a WHERE t IS NOT NULL "
            "UNION ALL SELECT %s FROM (SELECT to_regclass(%s) AS t) b WHERE t IS NOT NULL",
            (_RUN_STORE, _RUN_STORE, _CHECKPOINTS, _CHECKPOINTS),
        )
        return {str(name) for (name,) in await cursor.fetchall()}


async def check_run_store(url: str, doing: str = "retention") -> None:
    """Raise :class:`NoRunStoreError` unless ``url`` holds a tether run store.

    ``doing`` names what needs it, in the message.

    Raises:
        NoRunStoreError: no ``tether_threads`` table; the message says whether the
            database holds a checkpointer's tables instead.
        ConfigurationError: ``url`` is malformed (the checkpointers' checks).
    """
    parsed = parse_url(url)
    if parsed.backend == "postgres":
        import psycopg

        try:
            tables = await _postgres_tables(url)
        except psycopg.OperationalError:
            return  # unreachable: opening the run store says so, with its own message
    elif parsed.backend == "sqlite":
        tables = _sqlite_tables(parsed.sqlite_path)
    else:
        return  # not a run store URL at all: opening it says so
    if _RUN_STORE not in tables:
        raise NoRunStoreError(_message(url, _CHECKPOINTS in tables, doing))
