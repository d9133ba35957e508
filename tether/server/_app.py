"""The app: ``create_app(runtime, project)`` and its lifespan (runtime open, workers running)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from tether._version import __version__
from tether.runtime import Runtime, Worker
from tether.runtime import project as projects
from tether.runtime import worker as workers_module
from tether.server import (
    _assistants,
    _crons,
    _graphs,
    _runs,
    _store,
    _thread_stream,
    _threads,
    _unsupported,
    _v1,
    _v1_erasure,
    inbox,
)
from tether.server._authn import (
    ApiKeys,
    AuthenticatedRoutes,
    Authentication,
    Authenticator,
    AuthError,
    Gate,
    NoAuth,
)
from tether.server._body_limit import DEFAULT_MAX_BODY_MB, BodyLimit
from tether.server._caller import Caller
from tether.server._custom_auth import CustomAuth, load_auth
from tether.server._errors import install_error_handlers
from tether.server._http import (
    custom_app,
    custom_lifespan,
    generated_docs,
    merged_openapi,
    with_cors,
    with_custom_routes,
)
from tether.server._identity import set_no_auth
from tether.server._paths import SegmentPaths
from tether.server._served import Served
from tether.server.apikeys import open_key_store

__all__ = ["create_app"]

log = logging.getLogger("tether.server")


def create_app(
    runtime: Runtime,
    project: projects.Project | str | Path,
    *,
    workers: int = 0,
    worker_options: Mapping[str, Any] | None = None,
    no_auth: bool = False,
    max_body_bytes: int = int(DEFAULT_MAX_BODY_MB * 2**20),
) -> TetherApp:
    """A FastAPI app speaking the LangGraph Agent Server API over ``runtime``.

    Args:
        runtime: The run store to serve, not yet open: the app opens it at
            startup and closes it at shutdown.
        project: The ``langgraph.json`` project (or its path) whose graphs are
            the assistants; its graphs are read for thread state.
        workers: In-process :class:`~tether.runtime.Worker` instances started
            with the app (0: runs are executed by ``tether worker`` processes).
        worker_options: Keyword arguments for each worker (``concurrency``,
            ``lease``, ``shutdown_grace``, checkpointer options).
        no_auth: Serve every request as the anonymous caller of the default
            tenant (local development). Otherwise requests are authenticated by
            the project's ``auth.path``, else by the API keys kept in the run
            store's database (``tether apikeys``). With ``no_auth`` the approvals
            inbox trusts the user a request names (``tether.server._identity``).
        max_body_bytes: The largest request body taken; a larger one is a 413.

    Returns:
        The ASGI app (see :class:`TetherApp`).
    """
    loaded = project if isinstance(project, projects.Project) else projects.Project.load(project)
    options = dict(worker_options or {})
    custom = custom_app(loaded)
    started: list[Worker] = []
    loops: list[asyncio.AbstractEventLoop] = []
    stopping: set[str] = set()  # {"workers"} once stop_workers() ran
    auth = None if no_auth else load_auth(loaded)
    gate = Gate()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with runtime, custom_lifespan(custom), AsyncExitStack() as stack:
            gate.authenticator = await _authenticator(no_auth, auth, runtime, app, stack)
            # the system assistants exist before the first request
            await workers_module.register_graphs(runtime.store, loaded.graph_ids)
            app.state.tether = Served(runtime, loaded)
            loops[:] = [asyncio.get_running_loop()]
            started[:] = [
                Worker(runtime.url, loaded, checkpoints_url=runtime.checkpoints_url, **options)
                for _ in range(workers)
            ]
            tasks = [
                asyncio.create_task(w.run(), name=f"tether-worker-{i}")
                for i, w in enumerate(started)
            ]
            for task in tasks:
                task.add_done_callback(_report_stopped)
            try:
                yield
            finally:
                if not stopping:  # a second stop() would cut the workers' grace short
                    for worker in started:
                        worker.stop()
                for task in tasks:
                    with contextlib.suppress(Exception, asyncio.CancelledError):
                        await task
                with contextlib.suppress(Exception):
                    await app.state.tether_store.aclose()

    app = FastAPI(title="tether", version=__version__, lifespan=lifespan)
    install_error_handlers(app)
    set_no_auth(app, no_auth)
    app.state.tether_scope = _scoper(gate)
    app.state.tether_gate = gate  # the inbox login checks credentials with it

    @app.exception_handler(AuthError)
    async def refused(_: Any, exc: AuthError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, exc.status, headers=exc.headers)

    app.state.tether_store = _store.StoreHolder(runtime.url)  # opened on the first store call

    _add_routes(app)
    api = SegmentPaths(Authentication(app, gate))
    routed = custom
    if custom is not None and (loaded.http or {}).get("enable_custom_route_auth") is True:
        routed = AuthenticatedRoutes(custom, gate)
    merged_openapi(app, custom)
    outer = with_cors(
        BodyLimit(with_custom_routes(api, routed, generated_docs(custom)), max_body_bytes),
        loaded.http,
    )
    return TetherApp(outer, app, started, loops, stopping)


def _add_routes(app: FastAPI) -> None:
    """The API's routes: LangGraph's, ``/v1``, the inbox; the 501 catch-all last."""

    @app.get("/ok")
    async def ok() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/info")
    async def info() -> dict[str, Any]:
        from langgraph.version import __version__ as langgraph_version

        return {
            "version": __version__,
            "langgraph_py_version": langgraph_version,
            "flags": {"assistants": True, "crons": True, "langsmith": False},
            "host": {"kind": "tether", "project_id": None, "revision_id": None},
        }

    app.include_router(_assistants.router)
    app.include_router(_threads.router)
    app.include_router(_graphs.router)
    app.include_router(_runs.router)
    app.include_router(_crons.router)
    app.include_router(_thread_stream.router)
    app.include_router(_store.router)
    app.include_router(_v1.router)
    app.include_router(_v1_erasure.router)
    app.include_router(inbox.api_router)
    app.include_router(inbox.pages_router)
    app.include_router(_unsupported.router)  # last: a real route always wins


class TetherApp:
    """The ASGI app :func:`create_app` returns: the API (routed so ids holding ``/``
    work), the project's ``http.app`` routes and CORS (``http.cors``), plus
    :meth:`stop_workers` for the server's signal handler.

    Attributes:
        fastapi: The FastAPI app of the API.
    """

    def __init__(
        self,
        asgi: Any,
        app: FastAPI,
        workers: list[Worker],
        loops: list[asyncio.AbstractEventLoop],
        stopping: set[str],
    ) -> None:
        self._asgi = asgi
        self.fastapi = app
        self._workers = workers  # filled at startup
        self._loops = loops  # the loop the app runs on, once started
        self._stopping = stopping

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self._asgi(scope, receive, send)

    def stop_workers(self) -> None:
        """Stop the in-process workers claiming, and hand their runs back at the next step.

        Call it when shutdown begins (SIGTERM), before open streams are closed: the
        runs then continue on another worker instead of finishing here first.
        Safe to call from a signal handler or another thread.
        """
        if "workers" in self._stopping:
            return
        self._stopping.add("workers")
        for loop in self._loops:
            for worker in self._workers:
                loop.call_soon_threadsafe(worker.stop)


async def _authenticator(
    no_auth: bool, auth: Any, runtime: Runtime, app: FastAPI, stack: AsyncExitStack
) -> Authenticator:
    """``--no-auth``, the project's ``auth.path``, else the run store's API keys."""
    if no_auth:
        return NoAuth()
    if auth is not None:
        return CustomAuth(auth, app.router.routes)
    return ApiKeys(await stack.enter_async_context(open_key_store(runtime.url)))


def _scoper(gate: Gate) -> Any:
    """How a request's :class:`Served` is made from the app's: scoped to the caller's
    tenant, and guarded by the ``@auth.on`` handlers of an ``auth.path`` project."""

    def scope(found: Served, caller: Caller) -> Served:
        authenticator = gate.authenticator
        if isinstance(authenticator, CustomAuth):
            from tether.server._guard import guarded

            return guarded(found, caller, authenticator)
        if caller.tenant == found.runtime.tenant:
            return found
        return replace(found, runtime=found.runtime.scoped(caller.tenant))

    return scope


def _report_stopped(task: asyncio.Task[None]) -> None:
    """Log an in-process worker that stopped on an error (runs then wait for another)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("%s stopped: %r; runs wait for another worker", task.get_name(), task.exception())
