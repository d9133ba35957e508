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
from tether.server._authn import AuthError, Gate, credential_headers
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
from tether.server._sessions import COOKIE as SESSION_COOKIE_AUTH
from tether.server._sessions import LIFETIME
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
        if exc.status == 401:
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


def _credential_kind(request: Request) -> str:
    """What the login page asks for when the server authenticates: ``"key"`` or
    ``"authorization"`` (see :func:`tether.server._authn.credential_headers`)."""
    headers = credential_headers(_gate(request).authenticator, "x")
    return "key" if "x-api-key" in headers else "authorization"


def _gate(request: Request) -> Gate:
    gate: Gate = request.app.state.tether_gate
    return gate


def _login_page(request: Request, token: str, problem: str | None = None) -> str:
    if no_auth(request):
        return login_page(token, problem)
    return login_page(token, problem, credential=_credential_kind(request))


def _session_cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        max_age=int(LIFETIME) if name == SESSION_COOKIE_AUTH else None,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


@router.get("/login")
async def login_form(request: Request) -> Response:
    token = _csrf.token_for(request)
    return _html(request, _login_page(request, token), 200, token)


async def _authenticated_login(request: Request, form: dict[str, str]) -> Response:
    """Check the pasted credential by authenticating with it, then start a session."""
    token = _csrf.token_for(request)
    credential = form.get("credential", "").strip()
    if not credential:
        problem = "paste your credential (the API key, or the Authorization header's value)"
        return _html(request, _login_page(request, token, problem), 422, token)
    if not credential.isascii() or not credential.isprintable():
        problem = "the credential can hold printable ASCII characters only (it is a header)"
        return _html(request, _login_page(request, token, problem), 422, token)
    gate = _gate(request)
    headers = credential_headers(gate.authenticator, credential)
    trial = {
        **request.scope,
        "method": "GET",
        "path": "/inbox",
        "raw_path": b"/inbox",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }
    try:
        if gate.authenticator is None:
            raise AuthError(503, "the server is starting")
        await gate.authenticator.authenticate(Request(trial))
    except AuthError as exc:
        problem = f"that credential was refused: {exc.detail}"
        return _html(request, _login_page(request, token, problem), exc.status, token)
    session_token, _ = gate.sessions.start(headers)
    response = RedirectResponse("/inbox", status_code=303)
    _session_cookie(response, request, SESSION_COOKIE_AUTH, session_token)
    return response


@router.post("/login")
async def login(request: Request) -> Response:
    token = _csrf.token_for(request)
    try:
        form = await _csrf.read_form(request)
        _csrf.check_csrf(request, form)
    except ApiError as exc:
        return _html(request, _login_page(request, token, exc.detail), exc.status, token)
    if not no_auth(request):
        return await _authenticated_login(request, form)
    try:
        user = make_user(
            form.get("user", ""), form.get("roles"), form.get("tenant"), source="no-auth:login"
        )
    except ApiError as exc:
        return _html(request, _login_page(request, token, exc.detail), exc.status, token)
    response = RedirectResponse("/inbox", status_code=303)
    _session_cookie(response, request, SESSION_COOKIE, start_session(request, user))
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
    _gate(request).sessions.end(request.cookies.get(SESSION_COOKIE_AUTH))
    response = RedirectResponse("/inbox/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(SESSION_COOKIE_AUTH, path="/")
    _csrf.set_cookie(response, request, _csrf.new_token())
    return response
