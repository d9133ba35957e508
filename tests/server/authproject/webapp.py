"""The project's own route, authenticated like the API (``http.enable_custom_route_auth``)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def whoami(request: Request) -> JSONResponse:
    return JSONResponse(
        {"identity": request.user.identity, "permissions": list(request.auth.scopes)}
    )


app = Starlette(routes=[Route("/whoami", whoami)])
