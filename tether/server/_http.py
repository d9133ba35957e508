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

__all__ = [
    "custom_app",
    "custom_lifespan",
    "generated_docs",
    "merged_openapi",
    "with_cors",
    "with_custom_routes",
]

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


def generated_docs(app: Any) -> frozenset[str]:
    """The paths of the documents FastAPI adds to ``app`` by itself (``/openapi.json``,
    ``/docs``, ``/redoc``): the server's own, which also describe ``app``'s routes, win."""
    names = ("openapi_url", "docs_url", "redoc_url", "swagger_ui_oauth2_redirect_url")
    found = {getattr(app, name, None) for name in names}
    docs_url = getattr(app, "docs_url", None)
    if docs_url and getattr(app, "swagger_ui_oauth2_redirect_url", None):
        found.add(docs_url + "/oauth2-redirect")
    return frozenset(p for p in found if isinstance(p, str) and p)


def merged_openapi(api: Any, custom: Any | None) -> None:
    """Make ``api``'s OpenAPI document describe ``custom``'s routes too (they win on a path)."""
    described = getattr(custom, "openapi", None)
    if not callable(described):
        return
    own = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is not None:  # merged already: the cached document, as FastAPI
            schema: dict[str, Any] = api.openapi_schema
            return schema
        document: dict[str, Any] = own()  # cached by FastAPI: merged once
        theirs = described() or {}
        document.setdefault("paths", {}).update(theirs.get("paths") or {})
        schemas = (theirs.get("components") or {}).get("schemas") or {}
        mine = document.setdefault("components", {}).setdefault("schemas", {})
        for name, schema in schemas.items():
            mine.setdefault(name, schema)
        return document

    api.openapi = openapi


class _CustomFirst:
    """ASGI: a request the custom app has a route for goes to it, any other to the API
    (but the documents FastAPI generated for it: the API's describe both)."""

    def __init__(self, custom: Any, api: Any, docs: frozenset[str]) -> None:
        self.custom = custom
        self.api = api
        self.docs = docs

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("path") not in self.docs:
            for route in self.custom.routes:
                match, _ = route.matches(scope)
                if match == Match.FULL:
                    await self.custom(scope, receive, send)
                    return
        await self.api(scope, receive, send)


def with_custom_routes(api: Any, custom: Any | None, docs: frozenset[str] = frozenset()) -> Any:
    """``api`` with the custom app's routes in front of it, but for its generated ``docs``."""
    return api if custom is None else _CustomFirst(custom, api, docs)


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
