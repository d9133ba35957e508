"""The ``http`` section of ``langgraph.json``: a custom app's routes, and CORS.

- ``http.app`` (``"./webapp.py:app"``): a Starlette or FastAPI app whose routes
  are served beside the API and win over it on the same path, as in LangGraph's
  server. Its lifespan runs inside the server's.
- ``http.cors``: Starlette's ``CORSMiddleware`` options (``allow_origins``,
  ``allow_methods``, ``allow_headers``, ``allow_credentials``,
  ``allow_origin_regex``, ``expose_headers``, ``max_age``), around everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Match

from tether.runtime import ProjectConfigError
from tether.runtime import project as projects

__all__ = ["custom_app", "custom_lifespan", "with_cors", "with_custom_routes"]

_CORS_KEYS = frozenset(
    {
        "allow_origins",
        "allow_methods",
        "allow_headers",
        "allow_credentials",
        "allow_origin_regex",
        "expose_headers",
        "max_age",
    }
)


def custom_app(project: projects.Project) -> Any | None:
    """The app ``http.app`` names, loaded; ``None`` without one.

    Raises:
        ProjectConfigError: It cannot be loaded, or it has no routes to serve.
    """
    if project.http_app is None:
        return None
    app = project.http_app.load()
    if not hasattr(app, "routes") or not callable(app):
        raise project.http_app.error(
            f"expected a Starlette or FastAPI app, got {type(app).__name__}"
        )
    return app


def custom_lifespan(app: Any | None) -> AbstractAsyncContextManager[Any]:
    """The custom app's lifespan (a no-op when it has none)."""
    router = getattr(app, "router", None)
    context = getattr(router, "lifespan_context", None)
    return nullcontext() if context is None else context(app)


class _CustomFirst:
    """ASGI: a request the custom app has a route for goes to it, any other to the API."""

    def __init__(self, custom: Any, api: Any) -> None:
        self.custom = custom
        self.api = api

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            for route in self.custom.routes:
                match, _ = route.matches(scope)
                if match == Match.FULL:
                    await self.custom(scope, receive, send)
                    return
        await self.api(scope, receive, send)


def with_custom_routes(api: Any, custom: Any | None) -> Any:
    """``api`` with the custom app's routes in front of it."""
    return api if custom is None else _CustomFirst(custom, api)


def with_cors(app: Any, http: Mapping[str, Any] | None) -> Any:
    """``app`` behind ``CORSMiddleware`` configured by ``http.cors`` (unchanged without it).

    Raises:
        ProjectConfigError: ``http.cors`` is not an object, or names an unknown option.
    """
    cors = (http or {}).get("cors")
    if cors is None:
        return app
    if not isinstance(cors, Mapping):
        raise ProjectConfigError(f"http.cors must be an object, got {type(cors).__name__}")
    unknown = sorted(set(cors) - _CORS_KEYS)
    if unknown:
        raise ProjectConfigError(
            f"http.cors has unknown option(s) {', '.join(unknown)}; "
            f"use {', '.join(sorted(_CORS_KEYS))}"
        )
    return CORSMiddleware(app, **dict(cors))
