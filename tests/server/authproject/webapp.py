"""The project's own routes, authenticated like the API (``http.enable_custom_route_auth``):
an HTTP route and a WebSocket one."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket


async def whoami(request: Request) -> JSONResponse:
    body = await request.json() if request.method == "POST" else None
    return JSONResponse(
        {"identity": request.user.identity, "permissions": list(request.auth.scopes), "body": body}
    )


async def whoami_socket(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_json({"identity": websocket.user.identity})
    await websocket.close()


app = Starlette(
    routes=[
        Route("/whoami", whoami, methods=["GET", "POST"]),
        WebSocketRoute("/whoami/socket", whoami_socket),
    ]
)
