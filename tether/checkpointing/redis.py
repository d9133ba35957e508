"""Redis checkpointer: LangGraph's AsyncRedisSaver, with its conformance gaps closed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tether.checkpointing._bridge import SyncBridge
from tether.checkpointing.url import CheckpointerURL, redact
from tether.errors import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
    MissingRedisModuleError,
)

try:
    from langgraph.checkpoint.redis.aio import AsyncRedisSaver
    from redis.asyncio import Redis
    from redis.exceptions import RedisError
except ImportError as exc:
    raise MissingDependencyError("the Redis checkpointer", "redis") from exc

__all__ = ["RedisSaver", "open_redis", "required_modules"]

_OPTIONS = {"key_prefix", "ttl", "connect_timeout"}
# Module names as MODULE LIST reports them -> the name users know.
_REQUIRED_MODULES = {"search": "RediSearch", "ReJSON": "RedisJSON"}


class RedisSaver(SyncBridge, AsyncRedisSaver):
    """``AsyncRedisSaver`` with tether's fixes for the official conformance suite.

    Works from async code directly and from sync code through
    :func:`tether.open_checkpointer_sync`.
    """


async def required_modules(client: Redis) -> list[str]:
    """The names of the Redis modules the saver needs that ``client``'s server lacks."""
    info = await client.execute_command("MODULE LIST")
    loaded = set()
    for module in info:
        fields = dict(zip(module[::2], module[1::2], strict=False)) if isinstance(
            module, list) else module
        name = fields.get(b"name", fields.get("name"))
        loaded.add(name.decode() if isinstance(name, bytes) else str(name))
    return [label for name, label in _REQUIRED_MODULES.items() if name not in loaded]


def _prefixes(key_prefix: str | None) -> dict[str, str]:
    if key_prefix is None:
        return {}
    if not key_prefix or ":" in key_prefix or not key_prefix.isprintable():
        raise ConfigurationError(
            f"Redis key_prefix {key_prefix!r} must be non-empty printable text without ':' "
            "(the saver uses ':' to separate key parts)"
        )
    return {"checkpoint_prefix": f"{key_prefix}_checkpoint",
            "checkpoint_write_prefix": f"{key_prefix}_checkpoint_write"}


@asynccontextmanager
async def open_redis(url: CheckpointerURL, **options: Any) -> AsyncIterator[RedisSaver]:
    """Connect to the Redis server ``url`` names, check its modules, yield a set-up saver.

    Args:
        url: The parsed ``redis://`` or ``rediss://`` URL.
        **options: ``key_prefix`` (isolates several tether deployments in one
            Redis), ``ttl`` (passed to the saver), ``connect_timeout`` in seconds.
    """
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) for redis: {', '.join(sorted(unknown))}; "
            f"accepted: {', '.join(sorted(_OPTIONS))}"
        )
    timeout = float(options.get("connect_timeout", 5))
    client = Redis.from_url(url.url, socket_connect_timeout=timeout)
    try:
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            raise BackendUnavailableError(
                f"cannot reach Redis at {url.where} ({redact(url.url)}): {exc}"
            ) from exc
        missing = await required_modules(client)
        if missing:
            raise MissingRedisModuleError(url.where, missing)
        saver = RedisSaver(redis_client=client, ttl=options.get("ttl"),
                           **_prefixes(options.get("key_prefix")))
        await saver.asetup()
        yield saver
    finally:
        await client.aclose()
