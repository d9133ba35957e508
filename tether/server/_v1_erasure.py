"""Erasure and the audit store over HTTP, under ``/v1``.

* ``POST /v1/erasure`` erases one subject of the caller's tenant
  (``{"thread_id"}``, ``{"tenant"}`` or ``{"user"}``) and answers ``201`` with
  the receipt, which is kept (:func:`tether.retention.erasure.erase_store`
  with ``within`` the caller's tenant);
* ``GET /v1/erasure/{receipt_id}`` a receipt of the caller's tenant;
* ``GET /v1/audit/threads/{thread_id}`` what the audit store keeps about a
  thread of the caller's tenant: its summaries and receipts, after its state
  is gone.

Only a caller holding one of :data:`ERASURE_ROLES` may use them (403
otherwise), and only inside its own tenant: a thread of another tenant is
answered as a missing one (404), a tenant other than its own is refused
(403). A thread the run store no longer has is the caller's when the audit
store holds a summary or a receipt of it for the caller's tenant, so a second
erasure of the same thread is answered as the first (a receipt counting
nothing more). With an ``auth.path`` project, erasing a thread also needs the
``threads.delete`` handler's consent, as deleting it does.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tether.retention import (
    ErasureError,
    audit_trail,
    erase_store,
    retention_plane,
    sha256_text,
)
from tether.runtime import InvalidRunRequestError, Runtime, ids
from tether.server._errors import ApiError
from tether.server._identity import User, current_user
from tether.server._paths import path_id
from tether.server._served import Served, served
from tether.server.inbox._queue import tenant_runtime

__all__ = ["ERASURE_ROLES", "router"]

ERASURE_ROLES = frozenset({"admin", "erasure"})
"""The roles that may erase and read the audit store (an API key's roles, an
``auth.path`` user's ``permissions``, ``x-tether-roles`` with ``--no-auth``)."""

router = APIRouter(prefix="/v1", tags=["v1"])
UserDep = Annotated[User, Depends(current_user)]
Srv = Annotated[Served, Depends(served)]


class ErasureBody(BaseModel):
    """The one subject to erase, in the caller's tenant (unknown fields are refused)."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str | None = Field(default=None, description="Erase this thread.")
    tenant: str | None = Field(
        default=None, description="Erase the whole tenant: it must be the caller's own."
    )
    user: str | None = Field(
        default=None,
        description="Erase every thread of the tenant whose metadata `owner` or `user_id` "
        "is this user.",
    )

    @field_validator("thread_id", "tenant", "user")
    @classmethod
    def _an_id(cls, value: str | None, info: Any) -> str | None:
        if value is None:
            return None
        try:
            return ids.check_id(value, str(info.field_name))
        except InvalidRunRequestError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _one_subject(self) -> ErasureBody:
        named = [v for v in (self.thread_id, self.tenant, self.user) if v is not None]
        if len(named) != 1:
            raise ValueError(
                f"an erasure names exactly one subject: thread_id, tenant or user; got {len(named)}"
            )
        return self


class ReceiptOut(BaseModel):
    """Proof of one erasure: hashes and counts, nothing in clear."""

    receipt_id: str
    subject_kind: str = Field(description="`thread`, `tenant` or `user`.")
    subject_sha256: str = Field(description="SHA-256 of the subject's id.")
    tenant_sha256: str | None = Field(
        default=None, description="SHA-256 of the tenant whose data went."
    )
    threads: list[str] = Field(description="SHA-256 of each erased thread's id.")
    counts: dict[str, int] = Field(
        description="How many threads, runs, run events, crons, assistants, store items, "
        "API keys, checkpoints, steps, approvals, tool records and audit summaries went."
    )
    requested_at: str
    completed_at: str
    receipt_sha256: str = Field(description="SHA-256 of the canonical JSON of the other fields.")


class AuditOut(BaseModel):
    """What the audit store keeps about a thread of the caller's tenant."""

    thread_id: str
    summaries: list[dict[str, Any]] = Field(
        description="Its audit summaries, oldest first (hashes and counts, no values)."
    )
    receipts: list[ReceiptOut] = Field(description="The receipts of erasures that deleted it.")


class Refusal(BaseModel):
    """Why the request was refused."""

    detail: str


def _refusals(*statuses: int) -> dict[int | str, dict[str, Any]]:
    said = {
        401: "No known caller.",
        403: "The caller lacks the role 'admin' or 'erasure', names another tenant, or an "
        "auth.path handler refuses.",
        404: "Not in the caller's tenant (or unknown).",
    }
    return {s: {"model": Refusal, "description": said[s]} for s in statuses}


def _check_role(user: User) -> None:
    if not ERASURE_ROLES & set(user.roles):
        held = ", ".join(user.roles) or "none"
        raise ApiError(
            403,
            f"erasure and the audit store need the role 'admin' or 'erasure'; "
            f"user {user.identity!r} holds {held}",
        )


def _app_runtime(request: Request) -> Runtime:
    """The app's own runtime (every tenant, unguarded): retention spans the run store;
    each route checks the caller's tenant and handlers first."""
    found: Served = request.app.state.tether
    return found.runtime


async def _own_thread(srv: Served, runtime: Runtime, user: User, thread_id: str) -> None:
    """Raise 404 unless the thread is the caller's: in its tenant (and, with an
    ``auth.path``, allowed by the ``threads.delete`` handler), or gone and audited
    for its tenant."""
    missing = ApiError(404, f"no thread {thread_id!r} for this tenant")
    found = await retention_plane(runtime.store).thread_activity(thread_id)
    if found is not None:
        if found.tenant_id != user.tenant:
            raise missing
        await srv.authorize_thread(thread_id, "delete")
        return
    if (await audit_trail(runtime.store, thread_id, tenant=user.tenant)).empty:
        raise missing


async def _may_delete_all(srv: Served, runtime: Runtime, user: User, body: Any) -> None:
    """With an ``auth.path``: raise (403, nothing erased) unless the ``threads.delete``
    handler allows every thread a user or tenant erasure would take."""
    plane = retention_plane(runtime.store)
    after = ""
    while page := await (
        plane.subject_threads("user", body.user, after=after)
        if body.user is not None
        else plane.subject_threads("tenant", body.tenant, after=after)
    ):
        after = page[-1].thread_id
        for found in page:
            if found.tenant_id == user.tenant:
                await srv.authorize_thread(found.thread_id, "delete")


@router.post(
    "/erasure", status_code=201, response_model=ReceiptOut, responses=_refusals(401, 403, 404)
)
async def create_erasure(
    body: ErasureBody, user: UserDep, srv: Srv, request: Request
) -> ReceiptOut:
    """Erase a thread, the tenant, or a user's threads, in the caller's tenant; the receipt."""
    _check_role(user)
    if body.tenant is not None and body.tenant != user.tenant:
        raise ApiError(
            403,
            f"user {user.identity!r} acts for tenant {user.tenant!r} and cannot erase "
            f"tenant {body.tenant!r}",
        )
    runtime = _app_runtime(request)
    if body.thread_id is not None:
        await _own_thread(srv, runtime, user, body.thread_id)
    elif srv.has_handlers:
        await _may_delete_all(srv, runtime, user, body)
    try:
        receipt = await erase_store(
            runtime.store,
            await runtime.checkpointer(),
            thread=body.thread_id,
            tenant=body.tenant,
            user=body.user,
            within=user.tenant,
        )
    except ErasureError as exc:
        raise ApiError(422, str(exc)) from None
    return ReceiptOut(**receipt.to_dict())


def _checked(value: str, what: str) -> str:
    try:
        return ids.check_id(path_id(value), what)
    except InvalidRunRequestError as exc:
        raise ApiError(422, str(exc)) from None


@router.get("/erasure/{receipt_id}", response_model=ReceiptOut, responses=_refusals(401, 403, 404))
async def get_erasure(receipt_id: str, user: UserDep, request: Request) -> ReceiptOut:
    """A receipt of an erasure of the caller's tenant."""
    _check_role(user)
    wanted = _checked(receipt_id, "receipt_id")
    text = await retention_plane(_app_runtime(request).store).get_receipt(wanted)
    doc = None if text is None else json.loads(text)
    if doc is None or doc.get("tenant_sha256") != sha256_text(user.tenant):
        raise ApiError(404, f"no erasure receipt {wanted!r} for this tenant")
    return ReceiptOut(**doc)


@router.get(
    "/audit/threads/{thread_id}", response_model=AuditOut, responses=_refusals(401, 403, 404)
)
async def thread_audit(thread_id: str, user: UserDep, srv: Srv, request: Request) -> AuditOut:
    """A thread's audit summaries and erasure receipts (also after its state is gone)."""
    _check_role(user)
    wanted = _checked(thread_id, "thread_id")
    trail = await audit_trail(_app_runtime(request).store, wanted, tenant=user.tenant)
    if trail.empty:
        await tenant_runtime(srv.runtime, user).get_thread(wanted)  # 404 unless the tenant's
    return AuditOut(
        thread_id=wanted,
        summaries=trail.summaries,
        receipts=[ReceiptOut(**r) for r in trail.receipts],
    )
