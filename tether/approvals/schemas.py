"""Argument schemas of gated actions, so an edit is validated before it is accepted.

A request records where its pydantic schema lives (``module:QualName``) when
the class is importable, and every schema given to a gate in this process is
also registered under the action's name (building the graph registers the
schemas of its gated tools). ``decide`` validates edited arguments with it
before anything is written.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from pydantic import BaseModel, ValidationError

from tether.approvals.errors import InvalidEditError
from tether.approvals.hashing import to_json_value

__all__ = ["register_args_schema", "resolve_args_schema", "schema_ref", "validate_args"]

_lock = threading.Lock()
_by_action: dict[str, type[BaseModel]] = {}


def register_args_schema(action: str, schema: type[BaseModel]) -> None:
    """Make ``schema`` the argument schema of ``action`` in this process."""
    with _lock:
        _by_action[action] = schema


def schema_ref(schema: type[BaseModel]) -> str | None:
    """``module:QualName`` if the class can be imported back by that name, else ``None``."""
    ref = f"{schema.__module__}:{schema.__qualname__}"
    return ref if _import(ref) is schema else None


def _import(ref: str) -> Any:
    module_name, _, qualname = ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return None
    return target


def resolve_args_schema(action: str, ref: str | None) -> type[BaseModel] | None:
    """The schema recorded for a request: by import path first, then by action name."""
    if ref:
        found = _import(ref)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    with _lock:
        return _by_action.get(action)


def validate_args(action: str, ref: str | None, args: Any) -> dict[str, Any]:
    """``args`` validated against the action's schema, as plain JSON.

    Raises:
        InvalidEditError: Not a JSON object, no schema known for the action, or
            the arguments do not match it.
    """
    if not isinstance(args, dict):
        raise InvalidEditError(
            f"edited arguments for {action!r} must be a JSON object, got {type(args).__name__}"
        )
    schema = resolve_args_schema(action, ref)
    if schema is None:
        raise InvalidEditError(
            f"cannot validate edited arguments: no argument schema for action {action!r} is "
            "known in this process; pass args_schema= (a pydantic model) to the gate and build "
            "the graph before deciding"
        )
    try:
        model = schema.model_validate(args)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise InvalidEditError(
            f"edited arguments for {action!r} do not match its schema {schema.__name__}: {problems}"
        ) from None
    out: dict[str, Any] = to_json_value(model.model_dump(mode="json"), what="edited arguments")
    return out
