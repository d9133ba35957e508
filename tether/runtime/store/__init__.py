"""The run store: runs, threads, assistants and events in PostgreSQL or SQLite.

``open_run_store(url)`` opens the backend the URL names:

- ``postgresql://…`` (or ``postgres://…``): many hosts, ``LISTEN/NOTIFY`` wakes;
- ``sqlite:///path``: one host, several processes.

It does not migrate: call ``await store.setup()`` once (it is idempotent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from tether.checkpointing import KeyRing, key_ring_for, parse_url, redact
from tether.errors import ConfigurationError, MissingDependencyError
from tether.runtime.store.base import (
    KEEP,
    Claim,
    Created,
    Held,
    Hold,
    NewEvent,
    NewRun,
    Outcome,
    RunStore,
    ThreadCreation,
    WorkerInfo,
)
from tether.runtime.store.resealing import ResealCounts
from tether.runtime.store.retention import RetentionPlane, SubjectKind, ThreadActivity
from tether.runtime.store.transient import is_transient, transient_types

__all__ = [
    "KEEP",
    "Claim",
    "Created",
    "Held",
    "Hold",
    "NewEvent",
    "NewRun",
    "Outcome",
    "ResealCounts",
    "RetentionPlane",
    "RunStore",
    "SubjectKind",
    "ThreadActivity",
    "ThreadCreation",
    "WorkerInfo",
    "is_transient",
    "open_run_store",
    "transient_types",
]

SUPPORTED = "postgresql://… or sqlite:///path"


@asynccontextmanager
async def open_run_store(
    url: str,
    *,
    encryption: KeyRing | bool | None = None,
    min_size: int = 1,
    max_size: int = 10,
    connect_timeout: float = 5.0,
) -> AsyncIterator[RunStore]:
    """Open the run store at ``url``; closes its connections on exit.

    Args:
        url: ``postgresql://user:pass@host/db`` or ``sqlite:///path/to/file.db``.
        encryption: Seal runs' inputs and errors, threads' values, errors and
            interrupts, and event data (:mod:`~tether.runtime.store.sealing`):
            a :class:`~tether.checkpointing.encryption.KeyRing`, ``True`` (the
            environment's keys, required), ``None`` (the environment's keys, if
            any: the checkpointers' default) or ``False``.
        min_size: Fewest pooled connections (PostgreSQL).
        max_size: Most pooled connections (PostgreSQL).
        connect_timeout: Seconds to wait for the server (PostgreSQL).

    Raises:
        ConfigurationError: the scheme is neither of the two supported ones, or
            the URL lacks what its backend needs (host, file path).
        BackendUnavailableError: PostgreSQL cannot be reached.
        MissingDependencyError: a PostgreSQL URL without the ``postgres`` extra.
    """
    scheme = urlsplit(url).scheme.lower() if isinstance(url, str) else ""
    if scheme not in ("postgresql", "postgres", "sqlite"):
        shown = f"scheme {scheme!r}" if scheme else "no scheme"
        raise ConfigurationError(
            f"run store URL {redact(str(url))!r} has {shown}; the runtime supports {SUPPORTED}"
        )
    parsed = parse_url(url)  # the checkpointers' checks: host, file path, port
    keys = key_ring_for(encryption)
    store: RunStore
    if parsed.backend == "postgres":
        try:
            from tether.runtime.store.postgres import PostgresRunStore
        except ModuleNotFoundError as exc:
            if exc.name not in ("psycopg", "psycopg_pool"):
                raise
            raise MissingDependencyError("a PostgreSQL run store", "postgres") from exc

        store = await PostgresRunStore.open(
            url, min_size=min_size, max_size=max_size, connect_timeout=connect_timeout
        )
    else:
        from tether.runtime.store.sqlite import SqliteRunStore

        store = await SqliteRunStore.open(parsed.sqlite_path)
    store.seal_with(keys)
    try:
        yield store
    finally:
        await store.aclose()
