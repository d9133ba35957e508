"""Ids in URL paths, whatever they contain (``../x``, ``a/b``, ``%``, non-ASCII).

The SDK percent-encodes each id into one path segment (``/`` as ``%2F``, ``..``
as ``%2E%2E``). The ASGI server decodes the whole path before routing, so an id
holding ``/`` would be split into several segments and match no route.
:class:`SegmentPaths` re-decodes the raw path segment by segment instead, keeping
``%`` and ``/`` inside a segment encoded; :func:`path_id` decodes a path
parameter the rest of the way. Every id reaches the runtime exactly as the
client sent it, and the runtime's own checks (length, NUL) apply.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from tether.server._errors import ApiError

__all__ = ["SegmentPaths", "path_id", "quote_id"]


def _segment(raw: str) -> str:
    # Bytes that are not UTF-8 become lone surrogates, which path_id refuses: replacing
    # them with U+FFFD made different ids (%fe, %ff) name the same thread.
    decoded = unquote(raw, errors="surrogateescape")
    return decoded.replace("%", "%25").replace("/", "%2F")


def path_id(value: str) -> str:
    """A path parameter as the client meant it (see :class:`SegmentPaths`).

    Raises:
        ApiError: 422 for an id holding a NUL character, which no id can hold
            (PostgreSQL could not even look it up), or bytes that are not UTF-8.
    """
    decoded = unquote(value, errors="surrogateescape")
    if "\x00" in decoded:
        raise ApiError(422, f"the id {_shown(decoded)} in the path contains a NUL character")
    try:
        decoded.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(
            422, f"the id {_shown(decoded)} in the path is not UTF-8 once percent-decoded"
        ) from None
    return decoded


def _shown(value: str) -> str:
    """``value`` for an error message: escaped, and cut short (an id may be megabytes)."""
    text = value.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    return repr(text if len(text) <= 80 else text[:77] + "...")


class SegmentPaths:
    """ASGI middleware: route on the raw path decoded one segment at a time."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = scope.get("raw_path")
        if scope["type"] in ("http", "websocket") and isinstance(raw, bytes | bytearray):
            text = bytes(raw).decode("latin-1").split("?", 1)[0]
            scope = {**scope, "path": "/".join(_segment(p) for p in text.split("/"))}
        await self.app(scope, receive, send)


def quote_id(value: str) -> str:
    """``value`` as one path segment (for ``Location`` headers)."""
    quoted = quote(value, safe="")
    return "%2E" * len(quoted) if quoted and set(quoted) == {"."} else quoted
