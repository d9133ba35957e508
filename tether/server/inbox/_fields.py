"""The edit form: one field per argument, and the submitted fields back into arguments.

Each argument gets a text field named ``arg:<name>``. A string argument (by the
request's JSON schema) is taken as typed; any other is read as JSON (``2500``,
``true``, ``["a"]``), and without a schema, as JSON when it parses and as text
otherwise (as ``tether approvals edit --set`` does). The arguments are then
validated against the request's argument schema by the decision itself, so a
wrong type or a value out of range is refused with the schema's own message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tether.approvals import ApprovalRequest

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


def _shown(value: Any, kind: str) -> str:
    if value is None:
        return ""
    if kind == "string" and isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def arg_fields(request: ApprovalRequest, submitted: dict[str, str] | None = None) -> list[ArgField]:
    """The fields of ``request``'s arguments, holding ``submitted`` values when re-shown."""
    kinds = _kinds(request)
    fields = []
    for name in _names(request):
        kind = kinds.get(name, "")
        if submitted is not None and PREFIX + name in submitted:
            value = submitted[PREFIX + name]
        else:
            value = _shown(request.args.get(name), kind)
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
        if kind == "string":
            args[name] = raw
            continue
        try:
            args[name] = json.loads(raw)
        except json.JSONDecodeError:
            if kind:
                problems.append(f"{name}: {raw!r} is not a valid {kind} (write it as JSON)")
            else:
                args[name] = raw
    return args, problems
