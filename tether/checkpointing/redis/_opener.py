"""``open_redis``: connect, check the server's modules, validate options, set up a saver."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from tether.checkpointing._url import CheckpointerURL, redact
from tether.checkpointing.redis._prefixes import check_records_layout, saver_prefixes
from tether.checkpointing.redis._saver import RedisSaver
from tether.errors import BackendUnavailableError, ConfigurationError, MissingRedisModuleError

__all__ = ["open_redis", "required_modules"]

_OPTIONS = {"key_prefix", "ttl", "connect_timeout"}
# Module names as MODULE LIST reports them -> the name users know.
_REQUIRED_MODULES = {"search": "RediSearch", "ReJSON": "RedisJSON"}


async def required_modules(client: Redis) -> list[str]:
    """The names of the Redis modules the saver needs that ``client``'s server lacks."""
    info = await client.execute_command("MODULE LIST")
    loaded = set()
    for module in info:
        fields = (
            dict(zip(module[::2], module[1::2], strict=False))
            if isinstance(module, list)
            else module
        )
        name = fields.get(b"name", fields.get("name"))
        loaded.add(name.decode() if isinstance(name, bytes) else str(name))
    return [label for name, label in _REQUIRED_MODULES.items() if name not in loaded]


@asynccontextmanager
async def open_redis(url: CheckpointerURL, **options: Any) -> AsyncIterator[RedisSaver]:
    """Connect to the Redis server ``url`` names, check its modules, yield a set-up saver.

    Args:
        url: The parsed ``redis://`` or ``rediss://`` URL.
        **options: ``key_prefix`` (isolates several tether deployments in one
            Redis; see :mod:`~tether.checkpointing.redis._prefixes`), ``ttl``
            (passed to the saver), ``connect_timeout`` in seconds.
    """
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) for redis: {', '.join(sorted(unknown))}; "
            f"accepted: {', '.join(sorted(_OPTIONS))}"
        )
    key_prefix = options.get("key_prefix")
    prefixes = saver_prefixes(key_prefix)  # refuses a bad prefix before connecting
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
        await check_records_layout(client, key_prefix)
        saver = RedisSaver(redis_client=client, ttl=options.get("ttl"), **prefixes)
        await saver.asetup()
        yield saver
    finally:
        await client.aclose()
