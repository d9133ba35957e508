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

__all__ = ["dumps", "dumps_display", "find_nul", "loads", "loads_or_none"]


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
    except RecursionError as exc:
        raise TypeError("cannot be stored as JSON: it is nested too deeply") from exc


_NUL_ESCAPE = "\\u0000"


def find_nul(text: str, what: str) -> str | None:
    """Where JSON ``text`` (from :func:`dumps`) holds a NUL character, as a message; else None.

    PostgreSQL's ``jsonb`` cannot hold U+0000, so searchable columns (metadata,
    config) refuse it on every backend alike.
    """
    if _NUL_ESCAPE not in text:
        return None

    def walk(value: Any, path: str) -> str | None:
        if isinstance(value, str):
            return path if "\x00" in value else None
        if not isinstance(value, dict | list):
            return None
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in pairs:
            if isinstance(key, str) and "\x00" in key:
                return f"{path} (a key)"
            found = walk(item, f"{path}[{key!r}]")
            if found:
                return found
        return None

    where = walk(json.loads(text), what)
    if where is None:  # an escaped backslash followed by "u0000": no NUL after all
        return None
    return f"{where} contains a NUL character (U+0000), which searchable JSON cannot hold"


def _replace_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_replace_nul(k): _replace_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_nul(v) for v in value]
    return value


def dumps_display(value: Any) -> str:
    """:func:`dumps` for a searchable copy of a value kept exactly elsewhere (a thread's
    interrupts; the checkpoint holds them exactly): NUL characters become U+FFFD."""
    text = dumps(value)
    if _NUL_ESCAPE not in text:
        return text
    return dumps(_replace_nul(json.loads(text)))


def loads(text: str | bytes) -> Any:
    """Decode JSON text."""
    return json.loads(text)


def loads_or_none(text: str | bytes | None) -> Any:
    """Decode JSON text; ``None`` stays ``None``."""
    return None if text is None else json.loads(text)
