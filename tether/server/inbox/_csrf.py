"""CSRF protection of the inbox's forms: a per-session token and a hidden field.

Every form carries the token as the hidden field ``csrf``, and a POST is taken
only when the field equals the token the server expects:

* for a request of a login session (the server authenticates, the person
  logged in at ``/inbox/login``), the session's own token, kept with the
  session on the server (:mod:`tether.server._sessions`);
* otherwise, a random token set as a ``SameSite=Strict``, ``HttpOnly`` cookie
  the first time a page is shown (and renewed at login): another site can make
  a browser send the cookie (it cannot, with ``SameSite=Strict``) but cannot
  read it to fill in the field.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qsl

from fastapi import Request, Response

from tether.server._errors import ApiError

__all__ = ["COOKIE", "FIELD", "check_csrf", "new_token", "read_form", "set_cookie", "token_for"]

COOKIE = "tether_csrf"
FIELD = "csrf"
_MAX_FORM = 1 << 20


def new_token() -> str:
    """A fresh random token."""
    return secrets.token_urlsafe(32)


def _session_token(request: Request) -> str | None:
    """The token of the login session the request was authenticated by, if any."""
    session = getattr(request.state, "tether_inbox_session", None)
    return None if session is None else str(session.csrf)


def token_for(request: Request) -> str:
    """The request's token: its login session's, else its cookie's, else a fresh one to set."""
    return _session_token(request) or request.cookies.get(COOKIE) or new_token()


def set_cookie(response: Response, request: Request, token: str) -> None:
    """Set the token cookie on ``response`` (``Secure`` when served over HTTPS)."""
    response.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


async def read_form(request: Request) -> dict[str, str]:
    """The fields of a urlencoded form body (the first value of each name).

    Raises:
        ApiError: 415 for another content type, 413 for a body over 1 MiB,
            400 for a body that is not UTF-8.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise ApiError(415, f"send the form as application/x-www-form-urlencoded, not {kind}")
    body = await request.body()
    if len(body) > _MAX_FORM:
        raise ApiError(413, "the form is larger than 1 MiB")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the form is not UTF-8") from None
    fields: dict[str, str] = {}
    for name, value in parse_qsl(text, keep_blank_values=True):
        fields.setdefault(name, value)
    return fields


def check_csrf(request: Request, form: dict[str, str]) -> None:
    """Refuse a form whose ``csrf`` field does not match the request's session or cookie.

    Raises:
        ApiError: 403 naming the problem (reload the page to get a fresh form).
    """
    expected = _session_token(request) or request.cookies.get(COOKIE, "")
    field = form.get(FIELD, "")
    if not expected or not field or not hmac.compare_digest(expected.encode(), field.encode()):
        raise ApiError(
            403,
            "the form's CSRF token does not match this browser's session; reload the page "
            "and submit the form again",
        )
