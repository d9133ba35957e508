"""Who is asking: :func:`current_user`, the one place the server learns a request's user.

Every route that acts for a person (the approvals inbox and its API) takes the
user from :func:`current_user` and never from the request body. Normally that is
the request's authenticated caller (an API key's user, or the user the
project's ``auth.path`` returned: :mod:`tether.server._authn`), with its tenant
and roles. When the server runs with ``--no-auth`` (``create_app(...,
no_auth=True)``) it is whoever the request says:

* the headers ``x-tether-user`` (required), ``x-tether-roles`` (comma
  separated) and ``x-tether-tenant`` (default: the default tenant ``""``); or
* a session started on the inbox's login page (``/inbox/login``), where a
  person types the same three things.

Both are trusted as stated, which is what ``--no-auth`` means: use it on a
machine of your own. Without ``--no-auth``, a request that was not
authenticated is answered ``401``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from fastapi import FastAPI, Request

from tether.runtime import InvalidRunRequestError, ids
from tether.server._caller import Caller
from tether.server._errors import ApiError

__all__ = [
    "ROLES_HEADER",
    "SESSION_COOKIE",
    "TENANT_HEADER",
    "USER_HEADER",
    "User",
    "current_user",
    "end_session",
    "make_user",
    "no_auth",
    "set_no_auth",
    "start_session",
]

USER_HEADER = "x-tether-user"
ROLES_HEADER = "x-tether-roles"
TENANT_HEADER = "x-tether-tenant"
SESSION_COOKIE = "tether_session"
_RESERVED = "tether:"


@dataclass(frozen=True)
class User:
    """The person a request acts for.

    Attributes:
        identity: Their user id, compared with an approval's ``Approvers(users=...)``.
        tenant: The tenant they act for (``""``: the default tenant).
        roles: The roles they hold, compared with ``Approvers(roles=...)``.
        source: How the identity was established, recorded with their decisions.
    """

    identity: str
    tenant: str = ""
    roles: tuple[str, ...] = ()
    source: str = "no-auth"


@dataclass
class _Sessions:
    """The login sessions of one app (in memory: a restart logs everyone out)."""

    users: dict[str, User] = field(default_factory=dict)


def set_no_auth(app: FastAPI, enabled: bool) -> None:
    """Record whether ``app`` runs without authentication (``tether serve --no-auth``)."""
    app.state.tether_no_auth = bool(enabled)
    app.state.tether_sessions = _Sessions()


def no_auth(request: Request) -> bool:
    """Whether the app serving ``request`` runs with ``--no-auth``."""
    return bool(getattr(request.app.state, "tether_no_auth", False))


def make_user(identity: str, roles: str | None, tenant: str | None, *, source: str) -> User:
    """A :class:`User` from text a person typed or sent (roles comma separated).

    Raises:
        ApiError: 422 naming the problem: an empty or reserved user id, or a
            tenant that is not a usable id.
    """
    identity = identity.strip()
    if not identity:
        raise ApiError(422, "a user id is needed (the x-tether-user header, or the login form)")
    if identity.startswith(_RESERVED):
        raise ApiError(422, f"user ids starting with {_RESERVED!r} are reserved for tether itself")
    names = tuple(r.strip() for r in (roles or "").split(",") if r.strip())
    tenant = (tenant or "").strip()
    if tenant:
        try:
            ids.check_id(tenant, "tenant")
        except InvalidRunRequestError as exc:
            raise ApiError(422, str(exc)) from None
    return User(identity, tenant, names, source)


def start_session(request: Request, user: User) -> str:
    """Start a login session for ``user``; returns the token for the session cookie."""
    token = secrets.token_urlsafe(32)
    sessions: _Sessions = request.app.state.tether_sessions
    sessions.users[token] = user
    return token


def end_session(request: Request) -> None:
    """Forget the session the request's cookie names, if any."""
    sessions: _Sessions | None = getattr(request.app.state, "tether_sessions", None)
    token = request.cookies.get(SESSION_COOKIE)
    if sessions is not None and token:
        sessions.users.pop(token, None)


def _session_user(request: Request) -> User | None:
    sessions: _Sessions | None = getattr(request.app.state, "tether_sessions", None)
    token = request.cookies.get(SESSION_COOKIE)
    if sessions is None or not token:
        return None
    return sessions.users.get(token)


def current_user(request: Request) -> User:
    """The user ``request`` acts for (a FastAPI dependency).

    Raises:
        ApiError: 401 when no user is known: the server has no authentication
            and was not started with ``--no-auth``, or the request names no
            user; 422 when the named user is malformed.
    """
    if not no_auth(request):
        authenticated = getattr(request.state, "tether_caller", None)
        if isinstance(authenticated, Caller):
            return User(
                authenticated.identity,
                authenticated.tenant,
                authenticated.roles,
                authenticated.source,
            )
        raise ApiError(
            401,
            "the request was not authenticated: send an API key (x-api-key), or the "
            "credentials the project's auth.path expects; `tether serve --no-auth` trusts the "
            "x-tether-user header instead (development only)",
        )
    header = request.headers.get(USER_HEADER)
    if header is not None:
        return make_user(
            header,
            request.headers.get(ROLES_HEADER),
            request.headers.get(TENANT_HEADER),
            source="no-auth:header",
        )
    user = _session_user(request)
    if user is None:
        raise ApiError(
            401,
            f"who are you? send the {USER_HEADER} header (and {ROLES_HEADER}, "
            f"{TENANT_HEADER}), or log in at /inbox/login",
        )
    return user
