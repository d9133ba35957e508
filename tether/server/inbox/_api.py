"""The approvals API: list, get and decide stored approval requests as the current user.

* ``GET /approvals``: the user's tenant's requests, filtered by ``show``
  (``pending`` by default: those a run waits on; ``orphaned``, ``expired``,
  ``decided``, ``all``), ``approver``, ``role``, ``mine``, ``tenant``,
  ``expiring_before`` (ISO 8601) and ``older_than`` (``90``, ``15m``, ``2h``,
  ``3d``), soonest-expiring first (``sort=age``: oldest first);
* ``GET /approvals/{approval_id}``: one request, in full;
* ``POST /approvals/{approval_id}/decide`` with a JSON body ``{"decision":
  "approve" | "reject" | "edit", "args_sha256": ..., "reason": ..., "args":
  {...}}``: checked and stored as the current user; the run waiting on it is
  enqueued for a worker.

A failed check answers with the reason and stores nothing: 404 unknown (or
another tenant's), 403 not an approver, 409 already decided, expired, the
``args_sha256`` is not the one shown, or no run waits on it; 422 a malformed
body or edited arguments that do not validate.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from tether.approvals import ApprovalError
from tether.server._errors import ApiError
from tether.server._identity import User, current_user
from tether.server._paths import path_id
from tether.server._payloads import refusal
from tether.server._served import Served, served
from tether.server.inbox._deciding import decide_for, payload_from_body, status_of
from tether.server.inbox._filters import SHOWS, SORTS, Filters, parse_filters
from tether.server.inbox._queue import entries, entry

__all__ = ["check_tenant", "router"]

router = APIRouter(prefix="/approvals", tags=["approvals"])

UserDep = Annotated[User, Depends(current_user)]
ServedDep = Annotated[Served, Depends(served)]


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


# The routes read their query and body themselves (for their own error messages);
# these describe them in /openapi.json.
_LIST_QUERY = {
    "parameters": [
        _query("show", {"type": "string", "enum": list(SHOWS)}, "which requests"),
        _query("approver", {"type": "string"}, "only those naming this approver"),
        _query("role", {"type": "string"}, "only those naming this role"),
        _query("mine", {"type": "boolean"}, "only those the user may decide"),
        _query("tenant", {"type": "string"}, "the user's own tenant"),
        _query("expiring_before", {"type": "string", "format": "date-time"}, "ISO 8601"),
        _query("older_than", {"type": "string"}, "90, 90s, 15m, 2h or 3d"),
        _query("sort", {"type": "string", "enum": list(SORTS)}, "the order"),
    ]
}
_DECISION_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["decision"],
                    "properties": {
                        "decision": {"type": "string", "enum": ["approve", "edit", "reject"]},
                        "args_sha256": {"type": "string"},
                        "reason": {"type": "string"},
                        "args": {"type": "object"},
                    },
                }
            }
        },
    }
}


def check_tenant(filters: Filters, user: User) -> None:
    """Refuse a ``tenant`` filter naming a tenant other than the user's own.

    Raises:
        ApiError: 403 naming both tenants.
    """
    if filters.tenant is not None and filters.tenant != user.tenant:
        raise ApiError(
            403,
            f"you act for tenant {user.tenant!r} and may list only its approvals, "
            f"not tenant {filters.tenant!r}'s",
        )


@router.get("", openapi_extra=_LIST_QUERY)
async def list_requests(request: Request, user: UserDep, app: ServedDep) -> dict[str, Any]:
    filters = parse_filters(request.query_params)
    check_tenant(filters, user)
    now = datetime.now(UTC)
    found = await entries(app.runtime, user, filters, now)
    return {"approvals": [e.to_json(now) for e in found], "tenant": user.tenant}


@router.get("/{approval_id}")
async def get_request(approval_id: str, user: UserDep, app: ServedDep) -> dict[str, Any]:
    try:
        found = await entry(app.runtime, user, path_id(approval_id))
    except ApprovalError as exc:
        raise ApiError(status_of(exc), str(exc)) from None
    return found.to_json(datetime.now(UTC))


@router.post("/{approval_id}/decide", openapi_extra=_DECISION_BODY)
async def decide_request(
    approval_id: str, request: Request, user: UserDep, app: ServedDep
) -> dict[str, Any]:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        # Also what keeps a cross-site form from posting here with a login cookie.
        raise ApiError(415, f"send the decision as application/json, not {kind or 'no type'}")
    try:
        body = json.loads(await request.body())
    except (ValueError, RecursionError) as exc:
        raise ApiError(422, f"the body is not valid JSON: {exc}") from None
    problem = refusal(body, "the decision")
    if problem is not None:
        raise ApiError(422, problem)  # before anything is stored
    payload = payload_from_body(body)
    try:
        result = await decide_for(app.runtime, user, path_id(approval_id), payload)
    except ApprovalError as exc:
        raise ApiError(status_of(exc), str(exc)) from None
    return {
        "approval_id": result.approval_id,
        "decision": result.decision,
        "pending": result.pending,
        "finished": result.finished,
    }
