"""A limit on request bodies: a larger one is refused (413) before the route reads it.

Without one, a single request could hand the server a body of any size: a
100 MB thread metadata was stored, and sent back on every search that listed
it. The limit is checked on ``Content-Length`` first, and on the bytes that
arrive (a chunked body states no length).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DEFAULT_MAX_BODY_MB", "BodyLimit"]

DEFAULT_MAX_BODY_MB = 32.0
"""The default limit, in MiB (``tether serve --max-body-mb``)."""


class BodyLimit:
    """ASGI middleware refusing a request body over ``limit`` bytes with a 413."""

    def __init__(self, app: Any, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"the body limit must be positive, not {limit} bytes")
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stated = _content_length(scope)
        if stated is not None and stated > self.limit:
            await self._refuse(send, stated)
            return
        received = 0
        refused = started = False

        async def counted() -> Any:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Answered here; the route sees the client gone, and what it
                    # would answer is dropped.
                    refused = True
                    if not started:
                        await self._refuse(send, received)
                    return {"type": "http.disconnect"}
            return message

        async def unless_refused(message: Any) -> None:
            nonlocal started
            if not refused:
                started = started or message["type"] == "http.response.start"
                await send(message)

        await self.app(scope, counted, unless_refused)

    async def _refuse(self, send: Any, size: int) -> None:
        detail = (
            f"the request body is {size} bytes or more; this server takes at most {self.limit} "
            "(tether serve --max-body-mb)"
        )
        body = json.dumps({"detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers") or ():
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
