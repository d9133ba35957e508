"""The ``@auth.on`` handlers applied where LangGraph's server applies them: in storage.

With an ``auth.path``, each request's runtime reads and writes through a
:class:`GuardedStore`, which calls the handler for each resource and action
before the run store does (so every route, present or future, is covered):

============================  ==========================  =========================
run store call                resource.action             the filter applies to
============================  ==========================  =========================
``put_assistant``             ``assistants.create``       an existing assistant
``get_assistant``             ``assistants.read``         the assistant's metadata
assistant search              ``assistants.search``       each assistant's metadata
``create_thread``,            ``threads.create``          an existing thread
``put_thread``
``get_thread``                ``threads.read``            the thread's metadata
``list_threads``              ``threads.search``          each thread's metadata
``delete_thread``             ``threads.delete``          the thread's metadata
``create_run``, resume        ``threads.create_run``      the run's thread
``get_run``, events, runs     ``threads.read``            the run's thread
``cancel_run``                ``threads.update``          the run's thread
``update_thread``, state      ``threads.update``          the thread's metadata
``copy_thread``               ``threads.read``            the source thread
``delete_run``                ``threads.delete``          the run's thread
``list_assistants``           ``assistants.search``       each assistant's metadata
``assistant_versions``        ``assistants.read``         the assistant's metadata
``update_assistant``,         ``assistants.update``       the assistant's metadata
``set_assistant_version``
``delete_assistant``          ``assistants.delete``       the assistant's metadata
============================  ==========================  =========================

A run store call not listed here is refused (403) rather than
passed through unguarded, except the worker plane's and the system's own.

A handler's changes to the value's ``metadata`` are what is stored. An object
that does not pass the filter is reported as missing (404), as one of another
tenant is. A run that creates its thread creates it with the run's metadata
(as LangGraph does), so an owner filter set on the run holds for its thread.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tether.runtime import (
    AlreadyExistsError,
    AssistantNotFoundError,
    Run,
    RunNotFoundError,
    Runtime,
    Thread,
    ThreadNotFoundError,
    models,
)
from tether.runtime.store import NewRun, RunStore, ThreadCreation
from tether.server._caller import Caller
from tether.server._custom_auth import CustomAuth, matches, plain
from tether.server._errors import ApiError
from tether.server._served import Served

if TYPE_CHECKING:
    from tether.runtime.store import Created

__all__ = ["GuardedRuntime", "GuardedServed", "GuardedStore"]

_PAGE = 500
T = TypeVar("T")
# Calls that act for no user's data, or only on what a guarded call already checked.
_UNGUARDED = frozenset(
    {"dialect", "rows", "mark", "delete_temporary_threads", "schema_version", "verify"}
)


async def _filtered_page(
    fetch: Callable[[int], Awaitable[Sequence[T]]],
    keep: Callable[[T], Awaitable[bool]],
    limit: int,
    offset: int,
) -> builtins.list[T]:
    """Page ``limit`` items after ``offset`` of those ``keep`` accepts, reading the
    store ``_PAGE`` rows at a time (``fetch(offset)``) until enough are found."""
    found: builtins.list[T] = []
    skipped = page_offset = 0
    while len(found) < limit:
        page = await fetch(page_offset)
        for item in page:
            if not await keep(item):
                continue
            if skipped < offset:
                skipped += 1
                continue
            found.append(item)
            if len(found) == limit:
                break
        if len(page) < _PAGE:
            break
        page_offset += _PAGE
    return found


class GuardedStore(ThreadCreation):
    """A run store acting for one caller, through the project's ``@auth.on`` handlers."""

    def __init__(self, inner: RunStore, caller: Caller, auth: CustomAuth) -> None:
        self._inner = inner
        self._caller = caller
        self._auth = auth
        self._visible_runs: set[str] = set()  # runs already checked in this request

    def __getattr__(self, name: str) -> Any:
        if name in _UNGUARDED or name.startswith("_"):
            return getattr(self._inner, name)
        raise ApiError(
            403,
            f"this call (run store {name!r}) has no @auth.on mapping yet, so it is refused "
            "for projects with auth.path rather than made unguarded",
        )

    async def _authorize(self, resource: str, action: str, value: dict[str, Any]) -> Any:
        return await self._auth.authorize(self._caller, resource, action, value)

    # -- assistants -----------------------------------------------------------------------

    async def put_assistant(self, graph_id: str, *, tenant: str = "", **options: Any) -> Any:
        value = {
            "assistant_id": options.get("assistant_id"),
            "graph_id": graph_id,
            "config": dict(options.get("config") or {}),
            "context": dict(options.get("context") or {}),
            "metadata": dict(options.get("metadata") or {}),
            "if_exists": options.get("if_exists", "raise"),
            "name": options.get("name"),
        }
        filters = await self._authorize("assistants", "create", value)
        if filters and value["assistant_id"] is not None:
            try:
                existing = await self._inner.get_assistant(value["assistant_id"], tenant=tenant)
            except AssistantNotFoundError:
                existing = None
            if existing is not None and not matches(existing.metadata, filters):
                raise AlreadyExistsError(f"assistant {value['assistant_id']!r} already exists")
        options.update(
            config=value["config"],
            context=value["context"],
            metadata=value["metadata"],
            name=value["name"],
        )
        return await self._inner.put_assistant(graph_id, tenant=tenant, **options)

    async def get_assistant(self, assistant_id: str, *, tenant: str = "") -> models.Assistant:
        filters = await self._authorize("assistants", "read", {"assistant_id": assistant_id})
        found = await self._inner.get_assistant(assistant_id, tenant=tenant)
        if not matches(found.metadata, filters):
            raise AssistantNotFoundError(f"no assistant {assistant_id!r} for this user")
        return found

    # -- threads --------------------------------------------------------------------------

    async def put_thread(
        self,
        *,
        tenant: str = "",
        thread_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        if_exists: Any = "raise",
    ) -> tuple[Thread, bool]:
        value = {"thread_id": thread_id, "metadata": dict(metadata or {}), "if_exists": if_exists}
        filters = await self._authorize("threads", "create", value)
        if filters and thread_id is not None:
            existing = await self._thread_or_none(thread_id, tenant)
            if existing is not None and not matches(existing.metadata, filters):
                raise AlreadyExistsError(f"thread {thread_id!r} already exists")
        return await self._inner.put_thread(
            tenant=tenant, thread_id=thread_id, metadata=value["metadata"], if_exists=if_exists
        )

    async def _thread_or_none(self, thread_id: str, tenant: str) -> Thread | None:
        try:
            return await self._inner.get_thread(thread_id, tenant=tenant)
        except ThreadNotFoundError:
            return None

    async def get_thread(self, thread_id: str, *, tenant: str = "") -> Thread:
        filters = await self._authorize("threads", "read", {"thread_id": thread_id})
        found = await self._inner.get_thread(thread_id, tenant=tenant)
        if not matches(found.metadata, filters):
            raise ThreadNotFoundError(f"no thread {thread_id!r} for this user")
        return found

    async def list_threads(
        self,
        *,
        tenant: str = "",
        status: Any = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> builtins.list[Thread]:
        value = {
            "metadata": dict(metadata or {}),
            "status": status,
            "limit": limit,
            "offset": offset,
        }
        filters = await self._authorize("threads", "search", value)
        wanted = dict(value["metadata"])
        equal = plain(filters)
        if equal is not None:
            if any(k in wanted and wanted[k] != v for k, v in equal.items()):
                return []
            return await self._inner.list_threads(
                tenant=tenant,
                status=status,
                metadata={**wanted, **equal},
                limit=limit,
                offset=offset,
            )

        async def visible(thread: Thread) -> bool:
            return matches(thread.metadata, filters)

        return await _filtered_page(
            lambda at: self._inner.list_threads(
                tenant=tenant, status=status, metadata=wanted, limit=_PAGE, offset=at
            ),
            visible,
            limit,
            offset,
        )

    async def delete_thread(self, thread_id: str, *, tenant: str = "") -> None:
        filters = await self._authorize("threads", "delete", {"thread_id": thread_id})
        found = await self._inner.get_thread(thread_id, tenant=tenant)
        if not matches(found.metadata, filters):
            raise ThreadNotFoundError(f"no thread {thread_id!r} for this user")
        await self._inner.delete_thread(thread_id, tenant=tenant)

    # -- runs -----------------------------------------------------------------------------

    async def create_run(self, request: NewRun, *, tenant: str = "") -> Created:
        value: dict[str, Any] = {
            "thread_id": request.thread_id,
            "assistant_id": request.assistant_id,
            "run_id": request.run_id,
            "status": "pending",
            "metadata": dict(request.metadata or {}),
            "prevent_insert_if_inflight": request.multitask_strategy == "reject",
            "multitask_strategy": request.multitask_strategy,
            "if_not_exists": request.if_not_exists,
            "after_seconds": request.after_seconds,
            "kwargs": {"input": request.input, "command": request.command, **request.kwargs},
        }
        filters = await self._authorize("threads", "create_run", value)
        if request.thread_id is not None:
            thread = await self._thread_or_none(request.thread_id, tenant)
            if thread is None and request.if_not_exists == "create":
                # the thread is made with the run's metadata, so its filters hold for it
                assistant = await self._inner.get_assistant(request.assistant_id, tenant=tenant)
                meta = {
                    "graph_id": assistant.graph_id,
                    "assistant_id": assistant.assistant_id,
                    **value["metadata"],
                }
                thread = await self._inner.create_thread(
                    tenant=tenant,
                    thread_id=request.thread_id,
                    metadata=meta,
                    if_exists="do_nothing",
                )
            if thread is not None and not matches(thread.metadata, filters):
                raise ThreadNotFoundError(f"no thread {request.thread_id!r} for this user")
        created = await self._inner.create_run(
            dataclasses.replace(request, metadata=value["metadata"]), tenant=tenant
        )
        self._visible_runs.add(created.run.run_id)
        return created

    async def _run_for(
        self, run_id: str, tenant: str, action: str, value: dict[str, Any] | None = None
    ) -> Run:
        """The run, if the handler for ``threads.<action>`` lets the caller at its thread."""
        run = await self._inner.get_run(run_id, tenant=tenant)
        if action == "read" and run_id in self._visible_runs:
            return run
        base = {"thread_id": run.thread_id, "run_id": run_id}
        filters = await self._authorize("threads", action, {**base, **(value or {})})
        thread = await self._thread_or_none(run.thread_id, tenant)
        if thread is None or not matches(thread.metadata, filters):
            raise RunNotFoundError(f"no run {run_id!r} for this user")
        if action == "read":
            self._visible_runs.add(run_id)
        return run

    async def get_run(self, run_id: str, *, tenant: str = "") -> Run:
        return await self._run_for(run_id, tenant, "read")

    async def list_runs(
        self,
        *,
        tenant: str = "",
        thread_id: str | None = None,
        status: Any = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Run]:
        if thread_id is not None:
            await self.get_thread(thread_id, tenant=tenant)
            return await self._inner.list_runs(
                tenant=tenant, thread_id=thread_id, status=status, limit=limit, offset=offset
            )
        filters = await self._authorize("threads", "search", {"status": None, "metadata": {}})
        seen: dict[str, bool] = {}

        async def visible(run: Run) -> bool:
            if run.thread_id not in seen:
                thread = await self._thread_or_none(run.thread_id, tenant)
                seen[run.thread_id] = thread is not None and matches(thread.metadata, filters)
            return seen[run.thread_id]

        return await _filtered_page(
            lambda at: self._inner.list_runs(tenant=tenant, status=status, limit=_PAGE, offset=at),
            visible,
            limit,
            offset,
        )

    async def cancel_run(self, run_id: str, *, tenant: str = "", **options: Any) -> Run:
        action = options.get("action", "interrupt")
        await self._run_for(run_id, tenant, "update", {"action": action})
        return await self._inner.cancel_run(run_id, tenant=tenant, **options)

    async def resume_run(
        self, run_id: str, command: Mapping[str, Any], *, tenant: str = "", **options: Any
    ) -> Run:
        await self._run_for(run_id, tenant, "create_run", {"kwargs": {"command": dict(command)}})
        return await self._inner.resume_run(run_id, command, tenant=tenant, **options)

    async def add_events(self, run_id: str, events: Sequence[Any], *, tenant: str = "") -> int:
        await self.get_run(run_id, tenant=tenant)
        return await self._inner.add_events(run_id, events, tenant=tenant)

    async def events(self, run_id: str, *, tenant: str = "", **options: Any) -> Any:
        await self.get_run(run_id, tenant=tenant)
        return await self._inner.events(run_id, tenant=tenant, **options)

    # -- edits ----------------------------------------------------------------------------

    async def _thread_for(
        self, thread_id: str, tenant: str, action: str, value: dict[str, Any]
    ) -> dict[str, Any]:
        """The handler's value for ``threads.<action>``, if it lets the caller at the thread."""
        value = {"thread_id": thread_id, **value}
        filters = await self._authorize("threads", action, value)
        found = await self._inner.get_thread(thread_id, tenant=tenant)
        if not matches(found.metadata, filters):
            raise ThreadNotFoundError(f"no thread {thread_id!r} for this user")
        return value

    async def check_thread(self, thread_id: str, action: str, *, tenant: str = "") -> None:
        """Raise unless the handler for ``threads.<action>`` lets the caller at the thread
        (for a route that acts on a thread without a run store call of that action)."""
        await self._thread_for(thread_id, tenant, action, {})

    async def update_thread(
        self, thread_id: str, *, tenant: str = "", metadata: Mapping[str, Any]
    ) -> Thread:
        value = await self._thread_for(
            thread_id, tenant, "update", {"metadata": dict(metadata or {})}
        )
        return await self._inner.update_thread(thread_id, tenant=tenant, metadata=value["metadata"])

    async def record_thread_state(
        self, thread_id: str, *, tenant: str = "", **state: Any
    ) -> Thread:
        await self._thread_for(thread_id, tenant, "update", {"values": state.get("values")})
        return await self._inner.record_thread_state(thread_id, tenant=tenant, **state)

    async def copy_thread(self, thread_id: str, *, tenant: str = "", **options: Any) -> Thread:
        await self._thread_for(thread_id, tenant, "read", {})
        return await self._inner.copy_thread(thread_id, tenant=tenant, **options)

    async def delete_run(self, run_id: str, *, tenant: str = "") -> Run:
        await self._run_for(run_id, tenant, "delete")
        return await self._inner.delete_run(run_id, tenant=tenant)

    async def _assistant_for(
        self, assistant_id: str, tenant: str, action: str, value: dict[str, Any]
    ) -> dict[str, Any]:
        value = {"assistant_id": assistant_id, **value}
        filters = await self._authorize("assistants", action, value)
        found = await self._inner.get_assistant(assistant_id, tenant=tenant)
        if not matches(found.metadata, filters):
            raise AssistantNotFoundError(f"no assistant {assistant_id!r} for this user")
        return value

    async def list_assistants(self, *, tenant: str = "", **options: Any) -> builtins.list[Any]:
        value = {
            "graph_id": options.get("graph_id"),
            "metadata": dict(options.get("metadata") or {}),
            "limit": options.get("limit", 10),
            "offset": options.get("offset", 0),
        }
        filters = await self._authorize("assistants", "search", value)
        limit, offset = int(value["limit"]), int(value["offset"])
        query = {**options, "metadata": value["metadata"], "limit": _PAGE}

        async def visible(assistant: Any) -> bool:
            return matches(assistant.metadata, filters)

        return await _filtered_page(
            lambda at: self._inner.list_assistants(tenant=tenant, **{**query, "offset": at}),
            visible,
            limit,
            offset,
        )

    async def assistant_versions(
        self, assistant_id: str, *, tenant: str = "", **options: Any
    ) -> builtins.list[Any]:
        await self._assistant_for(assistant_id, tenant, "read", {})
        return await self._inner.assistant_versions(assistant_id, tenant=tenant, **options)

    async def update_assistant(
        self, assistant_id: str, *, tenant: str = "", **changes: Any
    ) -> models.Assistant:
        value = await self._assistant_for(
            assistant_id,
            tenant,
            "update",
            {**changes, "metadata": dict(changes.get("metadata") or {})},
        )
        changes["metadata"] = value["metadata"]
        return await self._inner.update_assistant(assistant_id, tenant=tenant, **changes)

    async def set_assistant_version(
        self, assistant_id: str, version: int, *, tenant: str = ""
    ) -> models.Assistant:
        await self._assistant_for(assistant_id, tenant, "update", {"version": version})
        return await self._inner.set_assistant_version(assistant_id, version, tenant=tenant)

    async def delete_assistant(self, assistant_id: str, *, tenant: str = "") -> models.Assistant:
        await self._assistant_for(assistant_id, tenant, "delete", {})
        return await self._inner.delete_assistant(assistant_id, tenant=tenant)


class GuardedRuntime(Runtime):
    """The app's open runtime, acting for one caller through a :class:`GuardedStore`."""

    def __init__(self, parent: Runtime, caller: Caller, auth: CustomAuth) -> None:
        super().__init__(parent.url, checkpoints_url=parent.checkpoints_url, tenant=caller.tenant)
        self._parent = parent
        self._guarded = GuardedStore(parent.store, caller, auth)

    @property
    def store(self) -> RunStore:
        return cast(RunStore, self._guarded)

    def scoped(self, tenant: str) -> Runtime:
        """Refused: a request's runtime acts for its caller and no one else."""
        raise RuntimeError("a request's runtime acts for its caller only; it cannot be re-scoped")


@dataclasses.dataclass
class GuardedServed(Served):
    """:class:`Served` for one caller of an ``auth.path`` project."""

    guard: GuardedStore | None = None

    @property
    def has_handlers(self) -> bool:
        return self.guard is not None

    async def authorize_thread(self, thread_id: str, action: str) -> None:
        if self.guard is not None:
            await self.guard.check_thread(thread_id, action, tenant=self.runtime.tenant)

    async def discard_thread(self, thread_id: str) -> None:
        runtime = self.runtime  # acting for the caller; its parent is the app's open runtime
        await (runtime._parent or runtime).scoped(runtime.tenant).delete_thread(thread_id)


def guarded(served: Served, caller: Caller, auth: CustomAuth) -> Served:
    """``served`` acting for ``caller`` through the project's handlers."""
    runtime = GuardedRuntime(served.runtime, caller, auth)
    return GuardedServed(
        runtime=runtime,
        project=served.project,
        guard=runtime._guarded,
    )
