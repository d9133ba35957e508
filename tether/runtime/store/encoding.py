"""JSON for the run store's columns: compact, UTF-8, and clear about what it cannot encode.

Besides JSON's own types it encodes what LangGraph's stream chunks commonly
hold: pydantic models (``model_dump``), dataclasses, tuples and sets (as
lists), ``datetime``/``date`` (ISO 8601) and ``UUID`` (as text). Anything else
raises ``TypeError`` naming its type; the caller converts it first.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import date, datetime
from typing import Any
from uuid import UUID

__all__ = ["dumps", "loads", "loads_or_none"]


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(
        f"a {type(value).__module__}.{type(value).__qualname__} cannot be stored as JSON; "
        "convert it to dicts, lists, strings and numbers first"
    )


def dumps(value: Any) -> str:
    """``value`` as compact JSON text (``TypeError`` for what JSON cannot hold)."""
    try:
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default
        )
    except ValueError as exc:  # NaN and infinities (not JSON), circular references
        raise TypeError(f"cannot be stored as JSON: {exc}") from exc


def loads(text: str | bytes) -> Any:
    """Decode JSON text."""
    return json.loads(text)


def loads_or_none(text: str | bytes | None) -> Any:
    """Decode JSON text; ``None`` stays ``None``."""
    return None if text is None else json.loads(text)
