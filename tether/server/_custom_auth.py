"""LangGraph's custom auth: the ``langgraph_sdk.Auth`` object ``auth.path`` names.

Authentication, as LangGraph's server does it: the ``@auth.authenticate``
handler runs on every request and gets, by parameter name, ``request``,
``body``, ``path``, ``method``, ``path_params``, ``query_params``, ``headers``
(``dict[bytes, bytes]``) and ``authorization``. It returns the user: a string
(the identity), a mapping with ``identity`` (and ``permissions``,
``display_name``, …), or an object with an ``identity`` attribute. An
``Auth.exceptions.HTTPException`` it raises is the answer (its status, detail and
headers); any other exception is a 500 naming it.

The user's tenant is its ``tenant`` field (a key of the mapping, an attribute
of the object), else the default tenant ``""``, where users are kept apart only
by what the ``@auth.on`` handlers filter. Its roles (for approvals) are its
``permissions``.

Authorization: :func:`authorize` calls the most specific ``@auth.on`` handler
for a resource and action (``threads.create``, then ``threads``, then
``*.create``, then the global one; none: allowed) with ``ctx`` and the value,
which the handler may change (``value["metadata"]["owner"] = ...``). ``None``
or ``True`` allows, ``False`` is 403, a dict is a metadata filter
(:func:`matches`): ``{"key": value}``, ``{"key": {"$eq": value}}``,
``{"key": {"$contains": item or [items]}}``, ``$or``/``$and`` of filters.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from starlette.requests import Request
from starlette.routing import BaseRoute, Match

from tether.runtime import InvalidRunRequestError, ids
from tether.runtime import project as projects
from tether.server._authn import AuthError
from tether.server._caller import AuthUser, Caller

__all__ = ["CustomAuth", "load_auth", "matches"]

log = logging.getLogger("tether.server")

_PARAMS = frozenset(
    {"request", "body", "path", "method", "path_params", "query_params", "headers", "authorization"}
)
_MAX_NESTING = 2


def load_auth(project: projects.Project) -> Any | None:
    """The ``Auth`` object ``auth.path`` names (``None`` without one).

    Raises:
        ProjectConfigError: It cannot be loaded, or it is not a ``langgraph_sdk.Auth``.
    """
    ref = project.auth_ref
    if ref is None:
        return None
    from langgraph_sdk import Auth

    found = ref.load()
    if not isinstance(found, Auth):
        raise ref.error(f"expected a langgraph_sdk.Auth object, got {type(found).__name__}")
    return found


class CustomAuth:
    """The project's ``Auth`` object, as the app's authenticator and authorizer."""

    def __init__(self, auth: Any, routes: Any) -> None:
        self.auth = auth
        self._routes = routes  # the API's routes, for path_params
        handler = auth._authenticate_handler
        self._wants = (
            frozenset() if handler is None else _PARAMS & set(inspect.signature(handler).parameters)
        )

    async def authenticate(self, request: Request) -> Caller:
        handler = self.auth._authenticate_handler
        if handler is None:  # LangGraph: no authenticate handler, no authentication
            return _caller("anonymous")
        from langgraph_sdk.auth.exceptions import HTTPException

        kwargs = {name: await self._argument(name, request) for name in self._wants}
        try:
            user = await handler(**kwargs)
        except HTTPException as exc:
            raise AuthError(exc.status_code, str(exc.detail), dict(exc.headers or {})) from None
        except Exception as exc:
            # The message may carry a secret or a backend's internals: the log has it,
            # the caller gets the exception's type only.
            log.exception("the auth.path authenticate handler raised")
            raise AuthError(
                500, f"the authenticate handler failed ({type(exc).__name__}); see the server log"
            ) from None
        return _caller(user)

    async def _argument(self, name: str, request: Request) -> Any:
        simple: dict[str, Any] = {
            "request": lambda: request,
            "path": lambda: request.url.path,
            "method": lambda: request.method,
            "path_params": lambda: self._path_params(request),
            "query_params": lambda: dict(request.query_params),
            "headers": lambda: dict(request.scope.get("headers") or ()),
            "authorization": lambda: request.headers.get("authorization"),
        }
        if name in simple:
            return simple[name]()
        raw = await request.body()  # body
        try:
            return orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            return None

    def _path_params(self, request: Request) -> dict[str, str]:
        for route in _flat(self._routes):
            match, child = route.matches(request.scope)
            if match == Match.FULL:
                return dict(child.get("path_params") or {})
        return {}

    async def authorize(
        self, caller: Caller, resource: str, action: str, value: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Run the handler for ``resource.action``: the filter it returned, else ``None``.

        Raises:
            AuthError: the handler returned ``False`` (403) or raised an
                ``Auth.exceptions.HTTPException`` (its status).
        """
        handler = _handler(self.auth, resource, action)
        if handler is None:
            return None
        from langgraph_sdk.auth.exceptions import HTTPException
        from langgraph_sdk.auth.types import AuthContext

        ctx = AuthContext(
            permissions=list(caller.user.permissions),
            user=caller.user,
            resource=resource,  # type: ignore[arg-type]
            action=action,  # type: ignore[arg-type]
        )
        try:
            result = await handler(ctx=ctx, value=value)
        except HTTPException as exc:
            raise AuthError(exc.status_code, str(exc.detail), dict(exc.headers or {})) from None
        if result is None or result is True:
            return None
        if result is False:
            raise AuthError(403, "Forbidden")
        if not isinstance(result, Mapping):
            raise AuthError(
                500,
                f"the @auth.on handler for {resource}.{action} returned "
                f"{type(result).__name__}; return None, True, False or a filter dict",
            )
        _check_filter(dict(result), resource, action)
        return dict(result)


def _flat(routes: Any) -> Iterator[BaseRoute]:
    """The routes of an app, those of included routers too (newer FastAPI keeps an
    included router as one entry holding ``original_router``)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _flat(inner.routes)
        elif isinstance(route, BaseRoute):
            yield route


def _handler(auth: Any, resource: str, action: str) -> Any:
    """The most specific handler, as LangGraph picks it."""
    for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
        found = auth._handlers.get(key)
        if found:
            return found[-1]
    return auth._global_handlers[-1] if auth._global_handlers else None


def _caller(user: Any) -> Caller:
    """The :class:`Caller` of what the authenticate handler returned."""
    if isinstance(user, str):
        fields: dict[str, Any] = {"identity": user}
        source = None
    elif isinstance(user, Mapping):
        fields, source = dict(user), None
    elif hasattr(user, "identity"):
        fields, source = {"identity": user.identity}, user
        for name in ("display_name", "is_authenticated", "permissions", "tenant"):
            if hasattr(user, name):
                fields[name] = getattr(user, name)
    else:
        raise AuthError(
            500,
            f"the authenticate handler returned {type(user).__name__}; return a string, "
            "a dict with 'identity', or an object with an identity attribute",
        )
    identity = fields.get("identity")
    if not isinstance(identity, str) or not identity:
        raise AuthError(500, "the user the authenticate handler returned has no identity")
    tenant = fields.get("tenant") or ""
    if tenant:
        try:
            ids.check_id(tenant, "tenant")
        except InvalidRunRequestError as exc:
            raise AuthError(500, f"the authenticate handler returned a bad tenant: {exc}") from None
    permissions = fields.get("permissions") or ()
    if isinstance(permissions, str) or not all(isinstance(p, str) for p in permissions):
        raise AuthError(500, "the user's permissions must be a list of strings")
    fields["permissions"] = list(permissions)
    return Caller(identity, str(tenant), tuple(permissions), AuthUser(fields, source), "auth.path")


def _check_filter(filters: Mapping[str, Any], resource: str, action: str, depth: int = 0) -> None:
    """Refuse a filter :func:`matches` would not apply as written (fail closed)."""
    where = f"the @auth.on handler for {resource}.{action} returned a filter"
    if depth > _MAX_NESTING:
        raise AuthError(500, f"{where} nested more than {_MAX_NESTING} levels")
    for key, value in filters.items():
        if key in ("$or", "$and"):
            if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
                raise AuthError(500, f"{where} whose {key} is not a list of filters")
            for item in value:
                _check_filter(item, resource, action, depth + 1)
        elif key.startswith("$"):
            raise AuthError(500, f"{where} with the unknown operator {key!r}")
        elif isinstance(value, Mapping) and (
            len(value) != 1 or next(iter(value)) not in ("$eq", "$contains")
        ):
            raise AuthError(
                500, f"{where} whose {key!r} uses {sorted(value)}; use $eq or $contains"
            )


def matches(metadata: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    """Whether ``metadata`` passes ``filters`` (all keys must hold)."""
    return all(_holds(metadata, key, want) for key, want in (filters or {}).items())


def _holds(metadata: Mapping[str, Any], key: str, want: Any) -> bool:
    if key == "$or":
        return any(matches(metadata, f) for f in want)
    if key == "$and":
        return all(matches(metadata, f) for f in want)
    if key not in metadata:
        return False
    have = metadata[key]
    op, operand = next(iter(want.items())) if isinstance(want, Mapping) else ("$eq", want)
    if op == "$eq":
        return bool(have == operand)
    if not isinstance(have, list):  # $contains
        return False
    return all(item in have for item in operand) if isinstance(operand, list) else operand in have


def plain(filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``filters`` as top-level equalities a metadata search can apply, else ``None``."""
    out: dict[str, Any] = {}
    for key, want in (filters or {}).items():
        if key.startswith("$"):
            return None
        if isinstance(want, Mapping):
            op, operand = next(iter(want.items()))
            if op != "$eq":
                return None
            out[key] = operand
        else:
            out[key] = want
    return out
