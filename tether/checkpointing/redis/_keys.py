"""Redis key layout: the per-checkpoint write registry under the saver's prefix."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.redis.base import REDIS_KEY_SEPARATOR
from langgraph.checkpoint.redis.key_registry import AsyncCheckpointKeyRegistry
from langgraph.checkpoint.redis.util import to_storage_safe_id, to_storage_safe_str

__all__ = ["PrefixedKeyRegistry"]


class PrefixedKeyRegistry(AsyncCheckpointKeyRegistry):
    """Upstream's per-checkpoint write registry, with its keys under the saver's prefix."""

    def __init__(self, client: Any, prefix: str) -> None:
        super().__init__(client)
        self._prefix = prefix

    def make_write_keys_zset_key(  # type: ignore[override]  # instance, not static
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> str:
        return REDIS_KEY_SEPARATOR.join(
            [
                self._prefix,
                to_storage_safe_id(thread_id),
                to_storage_safe_str(checkpoint_ns),
                to_storage_safe_id(checkpoint_id),
            ]
        )
