"""The edit form: one field per argument, and the submitted fields back into arguments.

Each argument gets a text field named ``arg:<name>`` holding its value as JSON
written by :func:`tether.approvals.escape_json`, so a control or bidi character
in a value shows as a ``\\uXXXX`` escape in the field too, never raw. A field
is read back as JSON (``2500``, ``"late parcel"``, ``["a"]``); a string
argument (by the request's JSON schema) typed without quotes is taken as the
text typed, and without a schema, text that is not JSON is taken as text (as
``tether approvals edit --set`` does). The arguments are then
validated against the request's argument schema by the decision itself, so a
wrong type or a value out of range is refused with the schema's own message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tether.approvals import ApprovalRequest, escape_json

__all__ = ["PREFIX", "ArgField", "arg_fields", "edited_args"]

PREFIX = "arg:"


@dataclass(frozen=True)
class ArgField:
    """One argument's field.

    Attributes:
        name: The argument's name (the field is ``arg:<name>``).
        kind: Its JSON schema type (``string``, ``integer``, ...), or ``""`` if unknown.
        value: The text the field holds.
    """

    name: str
    kind: str
    value: str


def _kinds(request: ApprovalRequest) -> dict[str, str]:
    schema = request.args_json_schema or {}
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    kinds = {}
    for name, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        kinds[str(name)] = kind if isinstance(kind, str) else ""
    return kinds


def _names(request: ApprovalRequest) -> list[str]:
    return sorted({*request.args, *_kinds(request)})


def _shown(name: str, request: ApprovalRequest) -> str:
    return escape_json(request.args[name]) if name in request.args else ""


def arg_fields(request: ApprovalRequest, submitted: dict[str, str] | None = None) -> list[ArgField]:
    """The fields of ``request``'s arguments, holding ``submitted`` values when re-shown."""
    kinds = _kinds(request)
    fields = []
    for name in _names(request):
        kind = kinds.get(name, "")
        if submitted is not None and PREFIX + name in submitted:
            value = submitted[PREFIX + name]
        else:
            value = _shown(name, request)
        fields.append(ArgField(name, kind, value))
    return fields


def edited_args(request: ApprovalRequest, form: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The arguments a submitted edit form states, and the problems found reading it.

    An empty field of an argument the request did not have is left out.
    """
    kinds = _kinds(request)
    args: dict[str, Any] = {}
    problems = []
    for name in _names(request):
        raw = form.get(PREFIX + name)
        if raw is None or (raw == "" and name not in request.args):
            continue
        kind = kinds.get(name, "")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            if kind not in ("", "string"):
                problems.append(f"{name}: {raw!r} is not a valid {kind} (write it as JSON)")
                continue
            value = raw
        args[name] = raw if kind == "string" and not isinstance(value, str) else value
    return args, problems
