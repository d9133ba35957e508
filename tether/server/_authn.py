"""Authentication of every API request, before routing (ASGI middleware).

One :class:`Authenticator` per app, chosen at startup:

- :class:`ApiKeys`: the built-in keys (``x-api-key: KEY`` or
  ``Authorization: Bearer KEY``), when ``langgraph.json`` has no ``auth.path``;
- ``CustomAuth`` (:mod:`tether.server._custom_auth`): the project's
  ``langgraph_sdk.Auth`` object;
- :class:`NoAuth`: everyone is the anonymous caller of the default tenant
  (``tether serve --no-auth``, local development only).

A refused request is answered ``{"detail": ...}`` with the status the
authenticator chose (401 unless a custom handler raised another) and never
reaches a route. ``/ok`` and ``/info`` are answered without authentication, as
LangGraph's server answers them; so are the project's ``http.app`` routes unless
``http.enable_custom_route_auth`` is true (LangGraph's option).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from tether.server._caller import ANONYMOUS, AuthUser, Caller
from tether.server._sessions import COOKIE as SESSION_COOKIE
from tether.server._sessions import Sessions
from tether.server.apikeys import KeyStore

__all__ = [
    "ApiKeys",
    "AuthError",
    "AuthenticatedRoutes",
    "Authentication",
    "Authenticator",
    "NoAuth",
    "credential_headers",
    "presented_key",
]

log = logging.getLogger("tether.server")

OPEN_PATHS = frozenset({"/ok", "/info"})
INBOX = "/inbox"
LOGIN = "/inbox/login"


class AuthError(Exception):
    """A refused request: its status, ``detail`` and extra headers."""

    def __init__(
        self, status: int = 401, detail: str = "Unauthorized", headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = dict(headers or {})


class Authenticator(Protocol):
    """Turns a request into its :class:`Caller`, or raises :class:`AuthError`."""

    async def authenticate(self, request: Request) -> Caller: ...


class NoAuth:
    """``--no-auth``: every request is the anonymous caller of the default tenant."""

    async def authenticate(self, request: Request) -> Caller:
        return ANONYMOUS


def presented_key(request: Request) -> str | None:
    """The key in ``x-api-key``, else the token of ``Authorization: Bearer``."""
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


class ApiKeys:
    """The built-in API keys of the run store's database."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys

    async def authenticate(self, request: Request) -> Caller:
        presented = presented_key(request)
        if presented is None:
            raise AuthError(
                401,
                "missing API key: send it as the x-api-key header or as "
                "'Authorization: Bearer <key>'",
                {"WWW-Authenticate": "Bearer"},
            )
        key = await self.keys.verify(presented)
        if key is None:
            raise AuthError(401, "invalid or revoked API key", {"WWW-Authenticate": "Bearer"})
        user = AuthUser(
            {
                "identity": key.user,
                "tenant": key.tenant,
                "permissions": list(key.roles),
                "is_authenticated": True,
            }
        )
        return Caller(key.user, key.tenant, key.roles, user, f"api-key:{key.key_id}")


def credential_headers(authenticator: Authenticator | None, credential: str) -> dict[str, str]:
    """The request headers that present ``credential`` as pasted on the login page: an
    API key as ``x-api-key``, anything else as the ``Authorization`` header's value."""
    if isinstance(authenticator, ApiKeys):
        return {"x-api-key": credential}
    return {"authorization": credential}


class Gate:
    """The authenticator of an app, set when the app starts (its key store opens then),
    and the inbox's login sessions."""

    def __init__(self) -> None:
        self.authenticator: Authenticator | None = None
        self.sessions = Sessions()


def _is_inbox(path: str) -> bool:
    return path == INBOX or path.startswith(INBOX + "/")


def _with_session(scope: dict[str, Any], request: Request, sessions: Sessions) -> dict[str, Any]:
    """``scope`` with its login session's credential added, when it carries a live
    session's cookie and no credential of its own."""
    if presented_key(request) is not None or request.headers.get("authorization"):
        return scope
    session = sessions.get(request.cookies.get(SESSION_COOKIE))
    if session is None:
        return scope
    extra = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in session.headers]
    state = {**scope.get("state", {}), "tether_inbox_session": session}
    return {**scope, "headers": [*scope["headers"], *extra], "state": state}


class Authentication:
    """ASGI middleware: authenticate each HTTP request and WebSocket handshake and put
    its :class:`Caller` in ``request.state.tether_caller``; refuse it otherwise.

    A WebSocket handshake is authenticated from its headers as the ``GET`` it is; a
    refused one is closed with code 1008 (policy violation), which uvicorn answers
    with ``403`` before the socket opens.
    """

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        kind = scope["type"]
        if kind not in ("http", "websocket") or path in OPEN_PATHS or path == LOGIN:
            await self.app(scope, receive, send)
            return
        if kind == "websocket":
            await self._handshake(scope, receive, send)
            return
        authenticator = self.gate.authenticator
        request = Request(scope, receive)
        inbox = _is_inbox(path)
        if inbox and not isinstance(authenticator, NoAuth):
            scope = _with_session(scope, request, self.gate.sessions)
            request = Request(scope, receive)
        try:
            found = await self._authenticate(request)
        except AuthError as exc:
            answer: Response = JSONResponse({"detail": exc.detail}, exc.status, headers=exc.headers)
            if inbox and exc.status == 401:
                answer = RedirectResponse(LOGIN, 303)  # a person: to the login page
            await answer(scope, receive, send)
            return
        except _Broken as exc:
            await JSONResponse({"detail": str(exc)}, 503)(scope, receive, send)
            return
        await self.app(_as_caller(scope, found), _replayed(request, receive), send)

    async def _handshake(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        as_get = {**scope, "type": "http", "method": "GET", "http_version": "1.1"}
        try:
            found = await self._authenticate(Request(as_get, _no_body))
        except (AuthError, _Broken) as exc:
            log.info("refused a WebSocket handshake to %s: %s", scope.get("path", ""), exc)
            await send({"type": "websocket.close", "code": 1008})
            return
        await self.app(_as_caller(scope, found), receive, send)

    async def _authenticate(self, request: Request) -> Caller:
        authenticator = self.gate.authenticator
        try:
            if authenticator is None:
                raise AuthError(503, "the server is starting")
            return await authenticator.authenticate(request)
        except AuthError:
            raise
        except Exception as exc:  # the key store's database is down, …: refused, named
            log.exception("authenticating a request failed")
            name = type(exc).__name__
            raise _Broken(f"authentication failed ({name}); see the server log") from exc


class _Broken(Exception):
    """Authenticating failed for a reason of the server's own (answered ``503``)."""


async def _no_body() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


def _as_caller(scope: dict[str, Any], found: Caller) -> dict[str, Any]:
    scope.setdefault("state", {})["tether_caller"] = found
    scope["user"] = found.user  # request.user, as Starlette's AuthenticationMiddleware sets it
    scope["auth"] = AuthCredentials(list(found.roles))
    return scope


class AuthenticatedRoutes:
    """The project's ``http.app`` with its requests authenticated too
    (``http.enable_custom_route_auth``): its routes see ``request.user``."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.routes = app.routes
        self._app = Authentication(app, gate)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self._app(scope, receive, send)


def _replayed(request: Request, receive: Any) -> Any:
    """``receive``, giving the body first when authentication already read it."""
    body: bytes | None = getattr(request, "_body", None)
    if body is None:
        return receive
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: dict[str, Any] = await receive()
        return message

    return replay
