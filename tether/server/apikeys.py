"""Built-in API keys: each key names a user, a tenant and roles; only its hash is stored.

A key is ``tk_<key id>_<secret>``: the key id (12 hex digits) finds the row, the
SHA-256 of the whole key is compared in constant time. The key itself is shown
once, when it is created (``tether apikeys create``), and never stored.

The keys live in the run store's database, in a table of their own
(``tether_api_keys``, created on first use), so every ``tether serve`` on one
run store accepts the same keys and a revocation takes effect on the next request.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from tether._pg_setup import lock_for_setup
from tether.checkpointing import parse_url, redact
from tether.errors import ConfigurationError
from tether.runtime import InvalidRunRequestError, ids

__all__ = ["ApiKey", "KeyStore", "NewKey", "open_key_store"]

_KEY = re.compile(r"tk_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")
_MAX_FIELD = 256

_PG_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('tether.api_keys', 0))"
_PG_TABLE = """CREATE TABLE IF NOT EXISTS tether_api_keys (
    key_id      TEXT PRIMARY KEY,
    key_sha256  TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    tenant_id   TEXT NOT NULL,
    roles       TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL,
    revoked_at  DOUBLE PRECISION
)"""
_SQLITE_TABLE = _PG_TABLE.replace("DOUBLE PRECISION", "REAL")
_COLUMNS = "key_id, key_sha256, user_id, tenant_id, roles, created_at, revoked_at"


@dataclass(frozen=True)
class ApiKey:
    """One stored key (never the key itself)."""

    key_id: str
    user: str
    tenant: str
    roles: tuple[str, ...]
    created_at: float
    revoked_at: float | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True)
class NewKey:
    """A key just created: ``secret`` is the whole key, shown this once."""

    key: ApiKey
    secret: str


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _check_field(value: str, what: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty):
        raise ConfigurationError(f"{what} must be a non-empty string, got {value!r}")
    if len(value) > _MAX_FIELD or "\x00" in value:
        raise ConfigurationError(f"{what} must be at most {_MAX_FIELD} characters without NUL")
    return value


class KeyStore:
    """The ``tether_api_keys`` table of one database (open with :func:`open_key_store`)."""

    def __init__(self, backend: _Backend) -> None:
        self._db = backend

    async def create(self, *, user: str, tenant: str, roles: Sequence[str] = ()) -> NewKey:
        """Make a key for ``user`` of ``tenant`` with ``roles``.

        Raises:
            ConfigurationError: the user, tenant or a role is empty or too long.
        """
        _check_field(user, "user")
        _check_field(tenant, "tenant", empty=True)
        if tenant:
            try:
                ids.check_id(tenant, "tenant")
            except InvalidRunRequestError as exc:
                raise ConfigurationError(str(exc)) from None
        role_list = tuple(_check_field(r, "role") for r in roles)
        key_id = secrets.token_hex(6)
        secret = f"tk_{key_id}_{secrets.token_urlsafe(32)}"
        now = time.time()
        await self._db.execute(
            f"INSERT INTO tether_api_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, NULL)",
            (key_id, _digest(secret), user, tenant, orjson.dumps(role_list).decode(), now),
        )
        return NewKey(ApiKey(key_id, user, tenant, role_list, now, None), secret)

    async def list(self) -> list[ApiKey]:
        """Every key, active and revoked, oldest first."""
        rows = await self._db.fetch(
            f"SELECT {_COLUMNS} FROM tether_api_keys ORDER BY created_at, key_id", ()
        )
        return [_key(r) for r in rows]

    async def count_active(self) -> int:
        rows = await self._db.fetch(
            "SELECT COUNT(*) FROM tether_api_keys WHERE revoked_at IS NULL", ()
        )
        return int(rows[0][0])

    async def revoke(self, key_id: str) -> ApiKey:
        """Revoke the key with this id (or whole key); it is refused from the next request.

        Raises:
            ConfigurationError: there is no such key.
        """
        match = _KEY.fullmatch(key_id)
        key_id = match.group(1) if match else key_id
        await self._db.execute(
            "UPDATE tether_api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
            (time.time(), key_id),
        )
        for key in await self.list():
            if key.key_id == key_id:
                return key
        raise ConfigurationError(f"no API key with id {key_id!r} (see `tether apikeys list`)")

    async def verify(self, presented: str) -> ApiKey | None:
        """The active key ``presented`` is, else ``None`` (malformed, unknown or revoked)."""
        match = _KEY.fullmatch(presented)
        if match is None:
            return None
        rows = await self._db.fetch(
            f"SELECT {_COLUMNS} FROM tether_api_keys WHERE key_id = ?", (match.group(1),)
        )
        if not rows or not hmac.compare_digest(rows[0][1], _digest(presented)):
            return None
        key = _key(rows[0])
        return key if key.active else None


def _key(row: Sequence[Any]) -> ApiKey:
    roles = tuple(str(r) for r in orjson.loads(row[4]))
    revoked = None if row[6] is None else float(row[6])
    return ApiKey(str(row[0]), str(row[2]), str(row[3]), roles, float(row[5]), revoked)


class _Backend:
    async def execute(self, sql: str, params: Sequence[Any]) -> None:
        raise NotImplementedError

    async def fetch(self, sql: str, params: Sequence[Any]) -> list[Sequence[Any]]:
        raise NotImplementedError


class _Sqlite(_Backend):
    def __init__(self, path: str) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout = 5000")
        self._conn.execute(_SQLITE_TABLE)
        self._lock = asyncio.Lock()

    def _run(self, sql: str, params: Sequence[Any]) -> list[Sequence[Any]]:
        return list(self._conn.execute(sql, tuple(params)).fetchall())

    async def execute(self, sql: str, params: Sequence[Any]) -> None:
        await self.fetch(sql, params)

    async def fetch(self, sql: str, params: Sequence[Any]) -> list[Sequence[Any]]:
        async with self._lock:
            return await asyncio.to_thread(self._run, sql, params)

    def close(self) -> None:
        self._conn.close()


class _Postgres(_Backend):
    def __init__(self, pool: Any) -> None:
        self._pool = pool

    async def execute(self, sql: str, params: Sequence[Any]) -> None:
        await self.fetch(sql, params)

    async def fetch(self, sql: str, params: Sequence[Any]) -> list[Sequence[Any]]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(sql.replace("?", "%s"), tuple(params))
            return list(await cur.fetchall()) if cur.description else []


@asynccontextmanager
async def open_key_store(url: str) -> AsyncIterator[KeyStore]:
    """The API keys kept in the run store's database at ``url`` (the table is made if
    missing).

    Raises:
        ConfigurationError: the URL is neither ``postgresql://…`` nor ``sqlite:///path``.
    """
    parsed = parse_url(url)
    if parsed.backend == "sqlite":
        path = parsed.sqlite_path
        sqlite = await asyncio.to_thread(_Sqlite, path)
        try:
            yield KeyStore(sqlite)
        finally:
            sqlite.close()
        return
    if parsed.backend != "postgres":
        raise ConfigurationError(
            f"API keys live in the run store: {redact(url)!r} is not postgresql://… or "
            "sqlite:///path"
        )
    from psycopg_pool import AsyncConnectionPool

    from tether.checkpointing import abort_idle_transactions

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=4,
        kwargs={"autocommit": True},
        open=False,
        configure=abort_idle_transactions,
    )
    await pool.open(wait=True, timeout=10)
    try:
        async with pool.connection() as conn, conn.transaction():
            await lock_for_setup(conn.execute, _PG_LOCK)
            await conn.execute(_PG_TABLE)
        yield KeyStore(_Postgres(pool))
    finally:
        await pool.close()
