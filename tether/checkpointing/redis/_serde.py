"""How the Redis saver serializes values: as PostgresSaver does, readable in RedisJSON.

Upstream's ``JsonPlusRedisSerializer`` writes every value as JSON, with
``{"lc": 2, "type": "constructor", ...}`` envelopes for objects, which LangGraph's
reviver then refuses to rebuild (only allow-listed modules): pydantic models
and dataclasses came back as dicts, ``Interrupt.response_schema`` was lost and
exceptions became envelopes. tether's Redis saver serializes with LangGraph's
default serializer instead (msgpack, as PostgresSaver does), and still reads
what upstream's serializer wrote.

Channel values stay in the checkpoint's JSON document: a value JSON represents
exactly (``None``, ``str``, ``bool``, 64-bit ``int``, finite ``float``, and lists
and string-keyed dicts of those) inline and readable, ``bytes`` (every value,
with encryption on) as upstream's ``{"__bytes__": base64}``, anything else as
``{"__typed__": [type, base64]}``. A document written so carries
``"values": "typed"``; one without it holds upstream's inline JSON.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from langgraph.checkpoint.redis.jsonplus_redis import JsonPlusRedisSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["TYPED_VALUES", "RedisSerde", "dump_values", "load_values"]

TYPED_VALUES = "typed"
"""The value of a checkpoint document's ``"values"`` field in this layout."""
_BYTES = "__bytes__"
_TYPED = "__typed__"


class RedisSerde(JsonPlusSerializer):
    """LangGraph's default serializer; reads upstream's ``"json"`` values too."""

    def __init__(self) -> None:
        super().__init__()
        self.legacy = JsonPlusRedisSerializer()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Load a value, through upstream's serializer if it wrote it."""
        if data[0] == "json":
            return self.legacy.loads_typed(data)
        return super().loads_typed(data)

    def _revive_if_needed(self, obj: Any) -> Any:
        # Upstream's inline channel values are revived through this name.
        return self.legacy._revive_if_needed(obj)


_INT64 = range(-(2**63), 2**63)


def _json_exact(value: Any) -> bool:
    """Whether ``value`` comes back from JSON as an equal value of the same types."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return value in _INT64  # RedisJSON keeps 64-bit integers
    if kind is float:
        return math.isfinite(value)  # JSON has no NaN or infinity
    if kind is list:
        return all(_json_exact(item) for item in value)
    if kind is dict:
        return all(type(k) is str and _json_exact(v) for k, v in value.items())
    return False  # subclasses (enums, named tuples, ...) and every other type


def _inline(value: Any) -> bool:
    # A dict shaped like a marker is stored typed, so that reading cannot mistake it.
    if type(value) is dict and (_BYTES in value or _TYPED in value):
        return False
    return _json_exact(value)


def dump_values(serde: RedisSerde, values: dict[str, Any]) -> dict[str, Any]:
    """Channel values as a checkpoint document stores them."""
    stored: dict[str, Any] = {}
    for channel, value in values.items():
        if _inline(value):
            stored[channel] = value
        elif isinstance(value, bytes):
            stored[channel] = {_BYTES: base64.b64encode(value).decode()}
        else:
            type_, blob = serde.dumps_typed(value)
            stored[channel] = {_TYPED: [type_, base64.b64encode(blob).decode()]}
    return stored


def load_values(serde: RedisSerde, stored: dict[str, Any]) -> dict[str, Any]:
    """Channel values from a checkpoint document written by :func:`dump_values`."""
    values: dict[str, Any] = {}
    for channel, value in stored.items():
        if isinstance(value, dict) and _TYPED in value:
            type_, blob = value[_TYPED]
            values[channel] = serde.loads_typed((type_, base64.b64decode(blob)))
        elif isinstance(value, dict) and _BYTES in value:
            values[channel] = base64.b64decode(value[_BYTES])
        else:
            values[channel] = value  # stored as JSON, read back equal
    return values
