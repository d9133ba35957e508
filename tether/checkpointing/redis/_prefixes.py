"""Key prefixes: one validated ``key_prefix``, every key namespace derived from it.

With ``key_prefix=P`` every key tether or the saver writes starts with one of

* ``P_checkpoint:`` (checkpoints; the index ``P_checkpoint``),
* ``P_checkpoint_latest:`` (each namespace's latest-checkpoint pointer),
* ``P_checkpoint_write:`` (pending writes; the index ``P_checkpoint_write``),
* ``P_checkpoint_write_keys_zset:`` (each checkpoint's write registry),
* ``P_tether:`` (tether's records and step logs, :mod:`tether.store._redis`).

``P`` holds no ``:``, and no suffix above ends another, so two prefixes never
share a namespace (``acme`` and ``acme_`` included). ``P`` holds no glob
character either, so ``SCAN MATCH P_checkpoint:*`` (key rotation) sees only
its own keys. Without a prefix the upstream names are kept (``checkpoint:``,
``write_keys_zset:``, ...) and tether's records live under ``tether:``.

Before this rule, tether's records lived under ``P.rstrip("_") + "_tether"``:
``acme_`` shared ``acme``'s. :func:`check_records_layout` refuses to open such a
prefix while its records are only at the old place; :func:`move_records` moves
them.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.redis.base import CHECKPOINT_PREFIX

from tether.errors import ConfigurationError

__all__ = [
    "check_key_prefix",
    "check_records_layout",
    "move_records",
    "records_prefix",
    "saver_prefixes",
]

# ':' separates key parts; the rest are glob syntax in SCAN MATCH patterns.
_FORBIDDEN = frozenset(":*?[]\\")
_DEFAULT_RECORDS = "tether"
_CHECKPOINT_SUFFIX = "_checkpoint"


def check_key_prefix(key_prefix: Any) -> str:
    """Return ``key_prefix`` if it is a valid Redis key prefix.

    Raises:
        ConfigurationError: Naming the prefix and the rule it breaks.
    """
    rule = (
        "a Redis key_prefix must be non-empty text without spaces, control characters, "
        "':' (it separates key parts) or the glob characters * ? [ ] \\ (key rotation "
        "scans with the prefix as a pattern)"
    )
    if (
        not isinstance(key_prefix, str)
        or not key_prefix
        or not key_prefix.isprintable()
        or any(c.isspace() or c in _FORBIDDEN for c in key_prefix)
    ):
        raise ConfigurationError(f"invalid Redis key_prefix {key_prefix!r}: {rule}")
    return key_prefix


def saver_prefixes(key_prefix: str | None) -> dict[str, Any]:
    """The saver's constructor arguments for ``key_prefix`` (none for upstream's layout)."""
    if key_prefix is None:
        return {}
    prefix = check_key_prefix(key_prefix)
    return {
        "checkpoint_prefix": f"{prefix}{_CHECKPOINT_SUFFIX}",
        "checkpoint_write_prefix": f"{prefix}{_CHECKPOINT_SUFFIX}_write",
    }


def records_prefix(checkpoint_prefix: str) -> str:
    """The namespace of tether's records, from the saver's checkpoint prefix."""
    if checkpoint_prefix == CHECKPOINT_PREFIX:
        return _DEFAULT_RECORDS
    return f"{checkpoint_prefix.removesuffix(_CHECKPOINT_SUFFIX)}_{_DEFAULT_RECORDS}"


def _legacy_records_prefix(key_prefix: str) -> str:
    base = key_prefix.rstrip("_")
    return f"{base}_{_DEFAULT_RECORDS}" if base else _DEFAULT_RECORDS


async def check_records_layout(client: Any, key_prefix: str | None) -> None:
    """Refuse a prefix whose records an earlier version kept in a shared namespace.

    Only a prefix ending in ``_`` moved. It is refused while the old namespace
    holds records and the new one none: those records may be its own (to move)
    or another prefix's (to leave).

    Raises:
        ConfigurationError: Saying where the records are and how to go on.
    """
    if key_prefix is None or not key_prefix.endswith("_"):
        return
    new = records_prefix(saver_prefixes(key_prefix)["checkpoint_prefix"])
    old = _legacy_records_prefix(key_prefix)
    pipe = client.pipeline(transaction=False)
    pipe.exists(f"{old}:seq")
    pipe.exists(f"{new}:seq")
    old_used, new_used = await pipe.execute()
    if old_used and not new_used:
        shared = key_prefix.rstrip("_") or "no key_prefix"
        raise ConfigurationError(
            f"Redis key_prefix {key_prefix!r}: earlier tether versions kept its records "
            f"(approvals, tool intents, step logs) under {old + ':'!r}, shared with "
            f"{shared!r}; they now live under {new + ':'!r}, which is empty. If only "
            f"{key_prefix!r} ever wrote there, stop its workers and move them with "
            f"tether.checkpointing.redis.move_records(client, {old!r}, {new!r}); to start "
            f"{key_prefix!r} without them, run SET {new}:seq 0"
        )


async def move_records(client: Any, old: str, new: str) -> int:
    """Move tether's records from namespace ``old`` to ``new``; returns the keys moved.

    Key names stored inside sets and sorted sets (the record indexes) are
    renamed too. Run it with no worker using either namespace.
    """
    if any(c in _FORBIDDEN for c in old + new):
        raise ConfigurationError(f"record namespaces {old!r} and {new!r} must be plain prefixes")

    def renamed(name: Any) -> str:
        text = name.decode() if isinstance(name, bytes) else str(name)
        return new + text[len(old) :] if text.startswith(f"{old}:") else text

    moved = 0
    async for key in client.scan_iter(match=f"{old}:*", count=1000):
        kind = await client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        target = renamed(key)
        if kind == "zset":
            members = await client.zrange(key, 0, -1, withscores=True)
            await client.zadd(target, {renamed(m): score for m, score in members})
            await client.unlink(key)
        elif kind == "set":
            await client.sadd(target, *[renamed(m) for m in await client.smembers(key)])
            await client.unlink(key)
        else:
            await client.rename(key, target)
        moved += 1
    return moved
