"""The project's own route, authenticated like the API (``http.enable_custom_route_auth``)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def whoami(request: Request) -> JSONResponse:
    body = await request.json() if request.method == "POST" else None
    return JSONResponse(
        {"identity": request.user.identity, "permissions": list(request.auth.scopes), "body": body}
    )


app = Starlette(routes=[Route("/whoami", whoami, methods=["GET", "POST"])])
