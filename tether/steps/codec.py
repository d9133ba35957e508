"""Canonical hashes of call inputs and JSON encodings of recorded outputs."""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict
from langchain_core.prompt_values import PromptValue
from pydantic import BaseModel

from tether.steps.errors import StepsError
from tether.steps.hashing import conversation_hash, dumps, message_fields

__all__ = ["canonical_hash", "decode_output", "encode_output"]


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data, with messages reduced to their content."""
    plain: Any
    if value is None or isinstance(value, str | int | float | bool):
        plain = value
    elif isinstance(value, BaseMessage):
        plain = message_fields(value)
    elif isinstance(value, PromptValue):
        plain = [message_fields(m) for m in value.to_messages()]
    elif isinstance(value, BaseModel):
        plain = value.model_dump(mode="json")
    elif isinstance(value, Mapping):
        plain = {str(k): _plain(v) for k, v in value.items()}
    elif isinstance(value, Sequence) and not isinstance(value, bytes):
        plain = [_plain(v) for v in value]
    else:
        plain = repr(value)
    return plain


def _is_message(value: Any) -> bool:
    return isinstance(value, BaseMessage)


def canonical_hash(value: Any) -> str:
    """A SHA-256 of ``value`` in canonical JSON (sorted keys, messages by content)."""
    if isinstance(value, list | tuple) and value and all(map(_is_message, value)):
        return conversation_hash(value)
    return hashlib.sha256(dumps(_plain(value)).encode()).hexdigest()


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
