"""Routes of the LangGraph Agent Server that tether serve does not offer yet.

Each answers ``501`` naming the SDK call, instead of a bare 404 or 405, so a
client learns at once that the server is reachable and the feature is missing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

__all__ = ["router"]

router = APIRouter()

# (method, path, the SDK call that uses it)
MISSING: tuple[tuple[str, str, str], ...] = ()


def _answer(call: str) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def not_yet(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "detail": f"{call} ({request.method} {request.url.path}) is not supported by "
                "tether serve yet"
            },
            status_code=501,
        )

    return not_yet


for _method, _path, _call in MISSING:
    router.add_api_route(_path, _answer(_call), methods=[_method], include_in_schema=False)
