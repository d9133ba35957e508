"""A fresh, empty database for every run of the crash harness.

* ``sqlite:///dir/name.db``: a new file ``dir/name-<label>.db`` per run.
* ``postgresql://user@host/db``: a new database on the same server per run
  (the user needs ``CREATEDB``), dropped afterwards.
* ``redis://host:port``: a new key prefix per run, whose keys and search
  indexes are deleted afterwards.

``memory://`` is refused: it does not outlive the process a crash test kills.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tether.checkpointing import parse_url, redact
from tether.crashtest._target import CrashTestError

__all__ = ["check_url", "fresh_database"]


def check_url(url: str) -> str:
    """Validate ``url`` for crash testing; returns its backend name.

    Raises:
        ConfigurationError: The URL is malformed.
        CrashTestError: The backend cannot be crash tested.
    """
    backend = parse_url(url).backend
    if backend == "memory":
        raise CrashTestError(
            "memory:// cannot be crash tested: its state dies with the process the harness "
            "kills; use sqlite:///path/crash.db, a postgresql:// or a redis:// URL"
        )
    if backend == "sqlite" and parse_url(url).sqlite_path == ":memory:":
        raise CrashTestError("sqlite:///:memory: cannot be crash tested; name a database file")
    return backend


@contextmanager
def fresh_database(url: str, label: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield a new, empty database of ``url``'s kind; remove it afterwards.

    Yields:
        The URL and the ``open_checkpointer`` options that reach the database.
    """
    backend = check_url(url)
    if backend == "redis":
        prefix = f"crashtest{label}{uuid.uuid4().hex[:8]}"
        try:
            yield url, {"key_prefix": prefix}
        finally:
            _drop_redis_prefix(url, prefix)
    elif backend == "sqlite":
        base = Path(parse_url(url).sqlite_path).expanduser().resolve()
        path = base.with_name(f"{base.stem}-{label}{base.suffix or '.db'}")
        for leftover in _sqlite_files(path):
            leftover.unlink(missing_ok=True)
        try:
            yield f"sqlite:///{path}", {}
        finally:
            for file in _sqlite_files(path):
                file.unlink(missing_ok=True)
    else:
        with _fresh_postgres(url, label) as fresh:
            yield fresh, {}


def _sqlite_files(path: Path) -> list[Path]:
    return [path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))]


@contextmanager
def _fresh_postgres(url: str, label: str) -> Iterator[str]:
    import psycopg

    name = f"tether_crashtest_{label}_{uuid.uuid4().hex[:8]}".lower()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.errors.InsufficientPrivilege as exc:
        raise CrashTestError(
            f"the user of {redact(url)!r} may not create databases; tether crashtest makes a "
            "fresh database per run, so grant it CREATEDB (ALTER ROLE ... CREATEDB)"
        ) from exc
    except psycopg.OperationalError as exc:
        raise CrashTestError(f"cannot reach PostgreSQL at {redact(url)!r}: {exc}") from exc
    parts = urlsplit(url)
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with suppress(psycopg.Error), psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _drop_redis_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        for index in client.execute_command("FT._LIST"):
            name = index.decode() if isinstance(index, bytes) else str(index)
            if name.startswith(prefix):
                client.execute_command("FT.DROPINDEX", name)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
    except redis.RedisError:
        pass  # best effort: an unreachable server already failed the run loudly
    finally:
        client.close()
