"""Canonical hashes of call inputs and JSON encodings of recorded outputs."""

from __future__ import annotations

import hashlib
import importlib
import json
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict
from pydantic import BaseModel

from tether.steps._errors import StepsError
from tether.steps._hashing import conversation_hash, dumps

__all__ = ["canonical_hash", "decode_output", "encode_output"]


_PLAIN = (str, int, bool)  # exact types: a float may be NaN, a subclass anything


def _all_messages(values: list[Any] | tuple[Any, ...]) -> bool:
    """Whether every item is a message: one test per distinct type, not per item."""
    return bool(values) and all(issubclass(t, BaseMessage) for t in set(map(type, values)))


def canonical_hash(value: Any, *, what: str = "the hashed step input") -> str:
    """A SHA-256 of ``value`` in canonical JSON (sorted keys, messages by content).

    Raises:
        CanonicalJSONError: ``value`` holds something canonical JSON cannot encode
            (a set, bytes, a datetime, any other object); the error names its type
            and where it is, such as ``$.refund.when``.
    """
    if isinstance(value, list | tuple) and _all_messages(value):
        return conversation_hash(value)
    return hashlib.sha256(dumps(value, what=what).encode()).hexdigest()


def encode_output(value: Any) -> dict[str, Any]:
    """A JSON document that :func:`decode_output` turns back into ``value``.

    Messages keep their type, ids, tool calls and usage; pydantic models keep
    their class; anything else must already be JSON.
    """
    if isinstance(value, BaseMessage):
        return {"message": messages_to_dict([value])[0]}
    if isinstance(value, BaseModel):
        cls = type(value)
        return {
            "model": f"{cls.__module__}:{cls.__qualname__}",
            "data": value.model_dump(mode="json"),
        }
    if value is None or type(value) in _PLAIN:  # JSON as it is: nothing to check
        return {"json": value}
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StepsError(
            f"cannot record a {type(value).__name__} result ({exc}); return a message, a "
            "pydantic model, or JSON (str, numbers, bools, None, lists, dicts)"
        ) from exc
    return {"json": value}


def decode_output(doc: dict[str, Any], schema: type[BaseModel] | None = None) -> Any:
    """The value :func:`encode_output` encoded, rebuilt.

    Args:
        doc: The stored document.
        schema: The pydantic class to rebuild a model with (else its recorded path).
    """
    if "message" in doc:
        return messages_from_dict([doc["message"]])[0]
    if "model" in doc:
        cls = schema or _import(doc["model"])
        return cls.model_validate(doc["data"])
    return doc["json"]


def _import(path: str) -> type[BaseModel]:
    module, _, qualname = path.partition(":")
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise StepsError(
                f"the recorded output's class {path} cannot be imported; define it at module "
                "level so a resumed run can rebuild the recorded value"
            )
    return target  # type: ignore[no-any-return]
