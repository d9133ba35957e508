"""Editing what the control plane created: thread metadata and state, copies, run
deletion, assistant versions, and the cleanup of temporary threads.

Written once for both backends, like :mod:`.plane`: each public method checks
its arguments, calls one backend hook that runs the SQL in one transaction, and
turns "no such row for this tenant" into the matching ``*NotFoundError``.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from tether.runtime.errors import (
    AssistantNotFoundError,
    InvalidRunRequestError,
    RunNotActiveError,
    RunNotFoundError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from tether.runtime.ids import check_id, new_id
from tether.runtime.models import Assistant, Run, Thread
from tether.runtime.store import control
from tether.runtime.store.encoding import dumps, dumps_display
from tether.runtime.store.rows import Dialect
from tether.runtime.store.validation import check_assistant_config, check_mapping, encode

__all__ = [
    "AssistantChange",
    "EditPlane",
    "StateRecord",
    "check_run_deletable",
    "check_thread_free",
    "ended_temporary",
]

StateStatus = Literal["idle", "interrupted"]


@dataclass(frozen=True)
class StateRecord:
    """A thread's values and interrupts as written after a state update, encoded
    (``values`` sealed for the thread when the store seals)."""

    status: StateStatus
    values: str
    interrupts: str


@dataclass(frozen=True)
class AssistantChange:
    """An assistant's next version: every field as it will be stored (JSON encoded)."""

    graph_id: str
    name: str
    description: str | None
    config: str
    context: str
    metadata: str


def _assistant_config(config: object) -> Mapping[str, Any]:
    check_assistant_config(config)
    return check_mapping(config, "config")


def _mirrored_update(
    current: Assistant, config: object, context: object
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """An update's ``config`` and ``context``, the one given copied to the other as
    :func:`~.control.mirrored` does (a ``config`` without ``configurable`` leaves the
    context as it was)."""
    new_config = dict(current.config if config is None else _assistant_config(config))
    new_context = dict(current.context if context is None else check_mapping(context, "context"))
    configurable = check_mapping(new_config.get("configurable"), "config.configurable")
    if config is not None and configurable and context is None:
        new_context = dict(configurable)
    elif context is not None and new_context and (config is None or not configurable):
        new_config["configurable"] = dict(new_context)
    return new_config, new_context


def ended_temporary(mark: str) -> str:
    """Temporary threads whose runs all stopped before a time (a thread stopped at an
    interrupt counts too, as in LangGraph), at most a limit."""
    return f"""SELECT t.thread_id, t.tenant_id FROM tether_threads t
 WHERE t.temporary
   AND EXISTS (SELECT 1 FROM tether_runs r WHERE r.thread_id = t.thread_id)
   AND NOT EXISTS (SELECT 1 FROM tether_runs r WHERE r.thread_id = t.thread_id
                    AND (r.status IN ('pending', 'running')
                         OR COALESCE(r.ended_at, r.updated_at) >= {mark}))
 ORDER BY t.updated_at LIMIT {mark}"""


def check_thread_free(thread_id: str, active_run_id: str | None) -> None:
    """Refuse a state update while a run is pending or running on the thread."""
    if active_run_id is not None:
        raise ThreadBusyError(
            f"thread {thread_id!r} has run {active_run_id!r} pending or running; update its "
            "state once the thread has no run in flight (or cancel the run)"
        )


def check_run_deletable(run: Run) -> None:
    """Only a run that has stopped can be deleted."""
    if run.status in ("pending", "running"):
        raise ThreadBusyError(f"run {run.run_id!r} is {run.status}; cancel it before deleting it")


class EditPlane(ABC):
    """The editing half of :class:`~.plane.ControlPlane` (see :class:`~.base.RunStore`)."""

    @property
    @abstractmethod
    def rows(self) -> Dialect: ...

    @abstractmethod
    async def get_assistant(self, assistant_id: str, *, tenant: str = "") -> Assistant: ...

    @abstractmethod
    async def get_thread(self, thread_id: str, *, tenant: str = "") -> Thread: ...

    # -- hooks a backend implements ---------------------------------------------------------

    @abstractmethod
    async def _merge_thread_metadata(
        self, thread_id: str, tenant: str, patch: str
    ) -> Thread | None:
        """Merge ``patch`` (a JSON object) into the metadata's top-level keys."""

    @abstractmethod
    async def _record_state(self, thread_id: str, tenant: str, state: StateRecord) -> Thread | None:
        """Write the thread's values, interrupts and status; ``ThreadBusyError`` while a
        run is pending or running on it."""

    @abstractmethod
    async def _insert_thread_copy(
        self, source: Thread, thread_id: str, tenant: str, meta: str, state: StateRecord | None
    ) -> Thread:
        """Insert a new thread with ``meta`` and the source's state; ``AlreadyExistsError``."""

    @abstractmethod
    async def get_run(self, run_id: str, *, tenant: str = "") -> Run: ...

    @abstractmethod
    async def _set_ending(
        self, run_id: str, tenant: str, error: str | None, reason: str | None
    ) -> Run | None:
        """Replace an ended run's ``error`` (sealed JSON) and ``ended_reason``; ``None``
        when the run is missing, foreign or not ended."""

    @abstractmethod
    async def _delete_run(self, run_id: str, tenant: str) -> Run | None:
        """Delete an ended run with its events (``ThreadBusyError`` while it is active)."""

    @abstractmethod
    async def _new_assistant_version(self, assistant_id: str, change: AssistantChange) -> Assistant:
        """Insert version ``max + 1`` and make the assistant that version."""

    @abstractmethod
    async def _assistant_versions(self, assistant_id: str) -> builtins.list[Assistant]:
        """Every version, newest first, as assistants (``updated_at`` = ``created_at``)."""

    @abstractmethod
    async def _set_assistant_version(self, assistant_id: str, version: int) -> Assistant | None:
        """Make the assistant its stored ``version``; ``None`` when there is no such version."""

    @abstractmethod
    async def _delete_assistant(self, assistant_id: str) -> bool: ...

    @abstractmethod
    async def _visible_assistants(self, tenant: str) -> builtins.list[Assistant]:
        """The tenant's and the default tenant's assistants, oldest first (the
        caller keeps the system ones of the latter)."""

    @abstractmethod
    async def _ended_temporary_threads(
        self, before: datetime, limit: int
    ) -> builtins.list[tuple[str, str]]:
        """(thread id, tenant) of temporary threads with no pending, running or
        interrupted run whose last run ended before ``before``."""

    @abstractmethod
    async def _delete_thread(self, thread_id: str, tenant: str) -> bool: ...

    # -- threads ----------------------------------------------------------------------------

    async def update_thread(
        self, thread_id: str, *, tenant: str = "", metadata: Mapping[str, Any]
    ) -> Thread:
        """Merge ``metadata`` into the thread's (top-level keys; LangGraph's ``PATCH``).

        Raises:
            InvalidRunRequestError: ``metadata`` is not a JSON object.
            ThreadNotFoundError: missing or foreign.
        """
        patch = encode(dict(check_mapping(metadata, "metadata")), "metadata", searchable=True)
        found = await self._merge_thread_metadata(thread_id, tenant, patch)
        if found is None:
            raise ThreadNotFoundError(control.no_thread(thread_id))
        return found

    def state_record(
        self,
        thread_id: str,
        *,
        values: Any,
        interrupts: Mapping[str, Any],
        status: StateStatus,
    ) -> StateRecord:
        """What :meth:`record_thread_state` writes, encoded and sealed for ``thread_id``."""
        if status not in ("idle", "interrupted"):
            raise InvalidRunRequestError(
                f"a thread's recorded state is 'idle' or 'interrupted', got {status!r}"
            )
        sealer = self.rows.sealer
        where = ("tether.thread", thread_id)
        interrupts = dict(check_mapping(interrupts, "interrupts"))
        sealed = (
            dumps(sealer.seal(interrupts, *where, "interrupts"))
            if sealer.enabled
            else dumps_display(interrupts)
        )
        return StateRecord(status, sealer.seal(values, *where, "values"), sealed)

    async def record_thread_state(
        self,
        thread_id: str,
        *,
        tenant: str = "",
        values: Any,
        interrupts: Mapping[str, Any],
        status: StateStatus,
    ) -> Thread:
        """Record the thread's state after an update outside a run (``update_state``):
        its ``values``, ``interrupts`` (task id → interrupts) and status.

        Raises:
            ThreadNotFoundError: missing or foreign.
            ThreadBusyError: a run is pending or running on the thread.
        """
        state = self.state_record(thread_id, values=values, interrupts=interrupts, status=status)
        found = await self._record_state(thread_id, tenant, state)
        if found is None:
            raise ThreadNotFoundError(control.no_thread(thread_id))
        return found

    async def copy_thread(
        self, thread_id: str, *, tenant: str = "", new_thread_id: str | None = None
    ) -> Thread:
        """A new thread with the metadata, values and interrupts of ``thread_id`` (not its
        runs; the caller copies the checkpoints). A busy source gives an ``idle`` copy.

        Raises:
            ThreadNotFoundError: the source is missing or foreign.
            AlreadyExistsError: ``new_thread_id`` is taken.
        """
        source = await self.get_thread(thread_id, tenant=tenant)
        target = new_id() if new_thread_id is None else check_id(new_thread_id, "thread_id")
        meta = encode(dict(source.metadata), "metadata", searchable=True)
        state = None
        if source.values is not None or source.interrupts:
            status: StateStatus = "interrupted" if source.status == "interrupted" else "idle"
            state = self.state_record(
                target, values=source.values, interrupts=source.interrupts, status=status
            )
        return await self._insert_thread_copy(source, target, tenant, meta, state)

    async def delete_temporary_threads(
        self, *, ended_before: datetime, limit: int = 100
    ) -> builtins.list[str]:
        """Delete temporary threads (stateless runs with ``on_completion="delete"``)
        whose runs all ended before ``ended_before``, with their runs and events, of
        every tenant; the caller deletes their checkpoints. Returns their ids."""
        control.check_page(limit, 0)
        deleted = []
        for thread_id, tenant in await self._ended_temporary_threads(ended_before, limit):
            if await self._delete_thread(thread_id, tenant):
                deleted.append(thread_id)
        return deleted

    # -- runs -------------------------------------------------------------------------------

    async def delete_run(self, run_id: str, *, tenant: str = "") -> Run:
        """Delete a run that has stopped, with its events; returns it as it was.

        Raises:
            RunNotFoundError: missing or foreign.
            ThreadBusyError: the run is pending or running (cancel it first).
        """
        found = await self._delete_run(run_id, tenant)
        if found is None:
            raise RunNotFoundError(control.no_run(run_id))
        return found

    async def set_run_ending(
        self,
        run_id: str,
        *,
        tenant: str = "",
        error: Mapping[str, Any] | None,
        reason: str | None,
    ) -> Run:
        """Rewrite how an ended run ended: its ``error`` and ``ended_reason`` (what a
        later compensation of the run undid). Its status and events stay.

        Raises:
            RunNotFoundError: missing or foreign.
            RunNotActiveError: the run has not ended (``pending``, ``running`` or
                ``interrupted``): a worker writes its outcome.
        """
        run = await self.get_run(run_id, tenant=tenant)
        sealed = None
        if error is not None:
            sealed = self.rows.sealer.seal(dict(error), "tether.run", run_id, "error")
        found = await self._set_ending(run_id, tenant, sealed, reason)
        if found is None:
            raise RunNotActiveError(
                f"run {run_id} is {run.status}, not ended: its outcome is its worker's to write"
            )
        return found

    # -- assistants -------------------------------------------------------------------------

    async def _own_assistant(self, assistant_id: str, tenant: str, change: str) -> Assistant:
        """The tenant's own assistant: a graph's system assistant is shared by every
        tenant, so no tenant may ``change`` it (``""`` included)."""
        found = await self.get_assistant(assistant_id, tenant=tenant)
        if control.is_system_assistant(found):
            raise InvalidRunRequestError(
                f"assistant {found.assistant_id!r} is the system assistant of graph "
                f"{found.graph_id!r}, shared by every tenant; it cannot be {change}: "
                "create an assistant of your own for the graph instead"
            )
        return found

    async def update_assistant(
        self,
        assistant_id: str,
        *,
        tenant: str = "",
        graph_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> Assistant:
        """A new version of the assistant, which becomes its latest (LangGraph's
        ``PATCH``): given fields replace the current ones, ``metadata`` is merged.

        Raises:
            AssistantNotFoundError: missing, or another tenant's.
            InvalidRunRequestError: a field is malformed, or it is a graph's system
                assistant (shared by every tenant).
        """
        current = await self._own_assistant(assistant_id, tenant, "updated")
        merged = {**current.metadata, **check_mapping(metadata, "metadata")}
        if config is not None or context is not None:
            config, context = _mirrored_update(current, config, context)
        change = AssistantChange(
            graph_id=current.graph_id if graph_id is None else check_id(graph_id, "graph_id"),
            name=current.name if name is None else name,
            description=current.description if description is None else description,
            config=encode(
                dict(current.config if config is None else _assistant_config(config)),
                "config",
                searchable=True,
            ),
            context=encode(
                dict(current.context if context is None else check_mapping(context, "context")),
                "context",
                searchable=True,
            ),
            metadata=encode(merged, "metadata", searchable=True),
        )
        return await self._new_assistant_version(current.assistant_id, change)

    async def assistant_versions(
        self,
        assistant_id: str,
        *,
        tenant: str = "",
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> builtins.list[Assistant]:
        """The assistant's versions, newest first, whose metadata has every key of
        ``metadata`` with an equal value.

        Raises:
            AssistantNotFoundError: missing or foreign.
        """
        control.check_page(limit, offset)
        wanted = check_mapping(metadata, "metadata")
        found = await self.get_assistant(assistant_id, tenant=tenant)
        versions = [
            v
            for v in await self._assistant_versions(found.assistant_id)
            if all(v.metadata.get(k) == value for k, value in wanted.items())
        ]
        return versions[offset : offset + limit]

    async def set_assistant_version(
        self, assistant_id: str, version: int, *, tenant: str = ""
    ) -> Assistant:
        """Make a stored version the assistant's latest again.

        Raises:
            AssistantNotFoundError: missing, another tenant's, or no such version.
            InvalidRunRequestError: it is a graph's system assistant.
        """
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise InvalidRunRequestError(f"version must be an integer >= 1, got {version!r}")
        current = await self._own_assistant(assistant_id, tenant, "given another version")
        found = await self._set_assistant_version(current.assistant_id, version)
        if found is None:
            raise AssistantNotFoundError(
                f"assistant {current.assistant_id!r} has no version {version} "
                f"(its latest is {current.version})"
            )
        return found

    async def delete_assistant(self, assistant_id: str, *, tenant: str = "") -> Assistant:
        """Delete the assistant and its versions; returns it as it was.

        Raises:
            AssistantNotFoundError: missing, or another tenant's.
            InvalidRunRequestError: it is a graph's system assistant (the project's
                graphs always have theirs, shared by every tenant).
        """
        current = await self._own_assistant(assistant_id, tenant, "deleted")
        if not await self._delete_assistant(current.assistant_id):
            raise AssistantNotFoundError(control.no_assistant(assistant_id))
        return current

    async def list_assistants(
        self,
        *,
        tenant: str = "",
        graph_id: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> builtins.list[Assistant]:
        """The tenant's and the system assistants, oldest first: of ``graph_id``,
        whose name contains ``name`` (any case), whose metadata has every key of
        ``metadata`` with an equal value."""
        control.check_page(limit, offset)
        wanted = check_mapping(metadata, "metadata")
        found = [
            a
            for a in await self._visible_assistants(tenant)
            if (a.tenant_id == tenant or control.is_system_assistant(a))
            and (graph_id is None or a.graph_id == graph_id)
            and (name is None or name.lower() in a.name.lower())
            and all(a.metadata.get(k) == v for k, v in wanted.items())
        ]
        return found[offset : offset + limit]
