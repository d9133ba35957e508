"""The runtime's errors as HTTP answers: status code and ``{"detail": message}``.

The SDK reads ``detail`` into its error's message and picks the exception class
from the status code, so a client sees the runtime's own explanation.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from tether.runtime import (
    AlreadyExistsError,
    InvalidRunRequestError,
    NotFoundError,
    ProjectConfigError,
    RunNotActiveError,
    TenantMismatchError,
    ThreadBusyError,
    UnknownGraphError,
)
from tether.runtime.store import is_transient, transient_types

__all__ = ["ApiError", "install_error_handlers", "status_for"]

log = logging.getLogger("tether.server")

RETRY_AFTER_S = 1
"""What a 503 for a store error that passes on its own asks the client to wait."""


class ApiError(Exception):
    """An HTTP error with a message, raised by the routes themselves."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (NotFoundError, 404),
    (UnknownGraphError, 404),
    (TenantMismatchError, 404),
    (ThreadBusyError, 409),
    (AlreadyExistsError, 409),
    (RunNotActiveError, 409),
    (InvalidRunRequestError, 422),
    (ProjectConfigError, 500),  # a graph factory raised: the project's bug, named
)


def status_for(error: BaseException) -> int | None:
    """The HTTP status of a runtime error, ``None`` for an unexpected one (500)."""
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return None


def _describe_details(app: FastAPI) -> None:
    """Say in ``/openapi.json`` that a 422's ``detail`` is a message, or FastAPI's list of
    validation errors (a body that does not parse)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        document = generate()
        schemas = document.get("components", {}).get("schemas", {})
        detail = schemas.get("HTTPValidationError", {}).get("properties", {}).get("detail")
        if detail is not None and "anyOf" not in detail:
            listed = {k: v for k, v in detail.items() if k != "title"}
            detail.clear()
            detail.update({"anyOf": [{"type": "string"}, listed], "title": "Detail"})
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def install_error_handlers(app: FastAPI) -> None:
    """Answer runtime errors with their status and message instead of a 500 (and describe
    the message in ``/openapi.json``)."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    async def runtime_error(_: Request, exc: Exception) -> JSONResponse:
        status = status_for(exc)
        if status is None:
            raise exc
        return JSONResponse({"detail": str(exc)}, status_code=status)

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        try:
            return await request_validation_exception_handler(request, exc)
        except ValueError:  # the input echoed back holds NaN or an infinity, not JSON
            errors = [
                {k: v for k, v in e.items() if k not in ("input", "ctx")} for e in exc.errors()
            ]
            return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)

    async def store_unavailable(request: Request, exc: Exception) -> JSONResponse:
        if not is_transient(exc):
            raise exc
        # The database dropped the connection or kept its lock past the busy timeout:
        # the same request succeeds once it is back, so say so (not a 500 and a trace).
        log.warning("%s %s: store unavailable: %s", request.method, request.url.path, exc)
        return JSONResponse(
            {
                "detail": f"the run store is unavailable for the moment ({_first_line(exc)}); "
                f"retry in {RETRY_AFTER_S} s"
            },
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )

    _describe_details(app)
    for kind in transient_types():
        app.add_exception_handler(kind, store_unavailable)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(ApiError, api_error)
    for kind, _status in _STATUS:
        app.add_exception_handler(kind, runtime_error)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
