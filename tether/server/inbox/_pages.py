"""The inbox's web pages: ``/inbox`` (the queue), ``/inbox/expired``, ``/inbox/a/{id}``.

Plain HTML forms posting back to the server (no script, no build step), each
carrying the CSRF token (:mod:`._csrf`). A decision goes through the same path
as the API's (:func:`._deciding.decide_for`); a refused one re-shows the request
with the reason and what was typed, with the status of the API's answer.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tether.approvals import ApprovalError, ApprovalRequest, DecisionPayload
from tether.server._errors import ApiError
from tether.server._identity import (
    SESSION_COOKIE,
    User,
    current_user,
    end_session,
    make_user,
    no_auth,
    start_session,
)
from tether.server._paths import path_id
from tether.server._served import Served, served
from tether.server.inbox import _csrf
from tether.server.inbox._api import check_tenant
from tether.server.inbox._deciding import decide_for, status_of
from tether.server.inbox._fields import arg_fields, edited_args
from tether.server.inbox._filters import Filters, parse_filters
from tether.server.inbox._html import (
    HEADERS,
    approval_url,
    detail_page,
    expired_page,
    login_page,
    message_page,
    queue_page,
)
from tether.server.inbox._queue import entries, entry

__all__ = ["router"]

router = APIRouter(prefix="/inbox", include_in_schema=False)
ServedDep = Annotated[Served, Depends(served)]


def _html(request: Request, text: str, status: int = 200, token: str | None = None) -> HTMLResponse:
    response = HTMLResponse(text, status_code=status, headers=HEADERS)
    if token is not None and request.cookies.get(_csrf.COOKIE) != token:
        _csrf.set_cookie(response, request, token)
    return response


def _user(request: Request) -> User | Response:
    """The current user, or the response to send instead (the login page, or why not)."""
    try:
        return current_user(request)
    except ApiError as exc:
        if exc.status == 401 and no_auth(request):
            return RedirectResponse("/inbox/login", status_code=303)
        token = _csrf.token_for(request)
        return _html(request, message_page("Not logged in", exc.detail, None, token), exc.status)


@router.get("")
async def queue(request: Request, app: ServedDep) -> Response:
    user = _user(request)
    if isinstance(user, Response):
        return user
    token = _csrf.token_for(request)
    now = datetime.now(UTC)
    try:
        filters = parse_filters(request.query_params)
        check_tenant(filters, user)
    except ApiError as exc:
        page = queue_page(user, [], Filters(), now, token, problem=exc.detail)
        return _html(request, page, exc.status, token)
    items = await entries(app.runtime, user, filters, now)
    return _html(request, queue_page(user, items, filters, now, token), 200, token)


@router.get("/expired")
async def expired(request: Request, app: ServedDep) -> Response:
    user = _user(request)
    if isinstance(user, Response):
        return user
    token = _csrf.token_for(request)
    now = datetime.now(UTC)
    gone = await entries(app.runtime, user, Filters(show="expired"), now)
    orphaned = await entries(app.runtime, user, Filters(show="orphaned", sort="age"), now)
    return _html(request, expired_page(user, gone, orphaned, now, token), 200, token)


@router.get("/a/{approval_id}")
async def detail(approval_id: str, request: Request, app: ServedDep) -> Response:
    user = _user(request)
    if isinstance(user, Response):
        return user
    token = _csrf.token_for(request)
    now = datetime.now(UTC)
    try:
        found = await entry(app.runtime, user, path_id(approval_id), now)
    except ApprovalError as exc:
        return _html(request, message_page("Not found", str(exc), user, token), 404, token)
    fields = arg_fields(found.view.request)
    return _html(request, detail_page(user, found, fields, now, token), 200, token)


def _payload(request: ApprovalRequest, form: dict[str, str], reason: str | None) -> DecisionPayload:
    """The decision a submitted form states.

    Raises:
        ApiError: 422 for an unknown decision, a rejection without a reason, or
            edited fields that cannot be read.
    """
    decision = form.get("decision", "")
    if decision not in ("approve", "edit", "reject"):
        raise ApiError(422, f"unknown decision {decision!r}: approve, edit or reject")
    if decision == "reject" and reason is None:
        raise ApiError(422, "a rejection needs a reason: the agent is told why")
    args = None
    if decision == "edit":
        args, problems = edited_args(request, form)
        if problems:
            raise ApiError(422, "the edited arguments were not taken: " + "; ".join(problems))
    return DecisionPayload(decision, form.get("args_sha256"), args, reason)


@router.post("/a/{approval_id}/decide")
async def decide(approval_id: str, request: Request, app: ServedDep) -> Response:
    user = _user(request)
    if isinstance(user, Response):
        return user
    token = _csrf.token_for(request)
    try:
        form = await _csrf.read_form(request)
        _csrf.check_csrf(request, form)
    except ApiError as exc:
        return _html(request, message_page("Refused", exc.detail, user, token), exc.status, token)
    wanted = path_id(approval_id)
    now = datetime.now(UTC)
    try:
        found = await entry(app.runtime, user, wanted, now)
    except ApprovalError as exc:
        return _html(request, message_page("Not found", str(exc), user, token), 404, token)
    request_doc = found.view.request
    reason = form.get("reason", "").strip() or None
    submitted = form if form.get("decision") == "edit" else None

    def refused(status: int, problem: str) -> Response:
        fields = arg_fields(request_doc, submitted)
        page = detail_page(user, found, fields, now, token, problem=problem, reason=reason or "")
        return _html(request, page, status, token)

    try:
        await decide_for(app.runtime, user, wanted, _payload(request_doc, form, reason))
    except ApiError as exc:
        return refused(exc.status, exc.detail)
    except ApprovalError as exc:
        return refused(status_of(exc), str(exc))
    return RedirectResponse(approval_url(wanted), status_code=303)


@router.get("/login")
async def login_form(request: Request) -> Response:
    token = _csrf.token_for(request)
    return _html(request, login_page(token, enabled=no_auth(request)), 200, token)


@router.post("/login")
async def login(request: Request) -> Response:
    token = _csrf.token_for(request)
    if not no_auth(request):
        return _html(request, login_page(token, enabled=False), 401, token)
    try:
        form = await _csrf.read_form(request)
        _csrf.check_csrf(request, form)
        user = make_user(
            form.get("user", ""), form.get("roles"), form.get("tenant"), source="no-auth:login"
        )
    except ApiError as exc:
        return _html(request, login_page(token, exc.detail), exc.status, token)
    response = RedirectResponse("/inbox", status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(
        SESSION_COOKIE,
        start_session(request, user),
        httponly=True,
        samesite="strict",
        secure=secure,
        path="/",
    )
    _csrf.set_cookie(response, request, _csrf.new_token())  # a fresh token per session
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    token = _csrf.token_for(request)
    try:
        _csrf.check_csrf(request, await _csrf.read_form(request))
    except ApiError as exc:
        return _html(request, message_page("Refused", exc.detail, None, token), exc.status, token)
    end_session(request)
    response = RedirectResponse("/inbox/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    _csrf.set_cookie(response, request, _csrf.new_token())
    return response
