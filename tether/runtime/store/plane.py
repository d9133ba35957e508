"""The control plane's public methods, written once for both backends.

Each method checks its arguments (the rules of :mod:`.control` and
:mod:`.validation`), calls one backend hook that runs the SQL, and turns "no
such row for this tenant" into the matching ``*NotFoundError``. A backend
implements only the ``_``-prefixed hooks, so both accept, refuse and report
exactly the same things.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tether.checkpointing import KeyRing
from tether.errors import ConfigurationError
from tether.runtime.errors import AssistantNotFoundError, RunNotFoundError, ThreadNotFoundError
from tether.runtime.ids import check_id, new_id
from tether.runtime.models import (
    Assistant,
    CancelAction,
    IfExists,
    Run,
    RunEvent,
    RunStatus,
    Thread,
    ThreadStatus,
)
from tether.runtime.store import control
from tether.runtime.store.base import Created, NewEvent, NewRun, ThreadCreation
from tether.runtime.store.control import NewAssistant
from tether.runtime.store.edits import EditPlane
from tether.runtime.store.resealing import ResealCounts, reseal
from tether.runtime.store.rows import Dialect
from tether.runtime.store.validation import ValidRun, check_mapping, encode, validate

__all__ = ["ControlPlane"]


class ControlPlane(ThreadCreation, EditPlane, ABC):
    """Assistants, threads, runs and event reads (see :class:`~.base.RunStore`), and
    the edits of :class:`~.edits.EditPlane`."""

    # -- hooks a backend implements ---------------------------------------------------------

    @property
    @abstractmethod
    def rows(self) -> Dialect:
        """How this store decodes rows and opens sealed values."""

    @abstractmethod
    def seal_with(self, keys: KeyRing | None) -> None:
        """Seal private values with ``keys`` from now on (``None``: in clear); see
        :mod:`tether.runtime.store.sealing`."""

    mark: str
    """The backend's parameter placeholder."""

    @abstractmethod
    async def _read(self, sql: str, params: Sequence[Any]) -> Sequence[Any]: ...

    @abstractmethod
    async def _execute(self, sql: str, params: Sequence[Any]) -> int: ...

    async def reseal(self, *, batch: int = 500) -> ResealCounts:
        """Re-seal every private value under the active key (see
        :mod:`~tether.runtime.store.resealing`).

        Raises:
            ConfigurationError: The store was opened without a key ring.
        """
        if not self.rows.sealer.enabled:
            raise ConfigurationError(
                "re-sealing the run store needs it opened with encryption: set "
                "TETHER_ENCRYPTION_KEYS='<new id>:<key>,<old id>:<key>' (new key first)"
            )
        return await reseal(self.rows.sealer, self._read, self._execute, self.mark, batch=batch)

    @abstractmethod
    async def _put_assistant(self, a: NewAssistant, tenant: str) -> tuple[Assistant, bool]:
        """Insert unless the id exists; (the row now stored, whether it was inserted)."""

    @abstractmethod
    async def _assistant_candidates(
        self, assistant_id: str, tenant: str
    ) -> builtins.list[Assistant]:
        """The tenant's assistant with this id, and the default tenant's with this id
        or the id of the system assistant of the graph with this id (at most three
        rows; :func:`~.control.visible_assistant` chooses)."""

    async def _find_assistant(self, assistant_id: str, tenant: str) -> Assistant | None:
        """The tenant's assistant with this id, else a system assistant (see
        :func:`~.control.visible_assistant`)."""
        candidates = await self._assistant_candidates(assistant_id, tenant)
        return control.visible_assistant(candidates, assistant_id, tenant)

    @abstractmethod
    async def _put_thread(self, thread_id: str, tenant: str, meta: str) -> tuple[Thread, bool]:
        """Insert an idle thread unless the id exists; (the stored row, inserted)."""

    @abstractmethod
    async def _find_thread(self, thread_id: str, tenant: str) -> Thread | None: ...

    @abstractmethod
    async def _list_threads(
        self,
        tenant: str,
        status: ThreadStatus | None,
        metadata: Mapping[str, Any],
        limit: int,
        offset: int,
    ) -> builtins.list[Thread]: ...

    @abstractmethod
    async def _delete_thread(self, thread_id: str, tenant: str) -> bool: ...

    @abstractmethod
    async def _create_run(self, v: ValidRun, assistant: Assistant, tenant: str) -> Created:
        """§3.3.7 in one transaction; raises ThreadNotFoundError / ThreadBusyError."""

    @abstractmethod
    async def _find_run(self, run_id: str, tenant: str) -> Run | None: ...

    @abstractmethod
    async def _list_runs(
        self,
        tenant: str,
        thread_id: str | None,
        status: RunStatus | None,
        limit: int,
        offset: int,
    ) -> builtins.list[Run]: ...

    @abstractmethod
    async def _cancel_run(
        self, run_id: str, tenant: str, action: CancelAction, reason: str | None
    ) -> Run:
        """§3.7 in one transaction; raises RunNotFoundError / RunNotActiveError."""

    @abstractmethod
    async def _resume_run(
        self, run_id: str, tenant: str, payload: str, events: Sequence[NewEvent]
    ) -> Run:
        """§3.6 in one transaction; raises RunNotFoundError / RunNotActiveError."""

    @abstractmethod
    async def _add_events(self, run_id: str, tenant: str, events: Sequence[NewEvent]) -> int:
        """Control-plane events; raises RunNotFoundError."""

    @abstractmethod
    async def _events(
        self, run_id: str, tenant: str, after: int, limit: int, kinds: Sequence[str] | None
    ) -> builtins.list[RunEvent] | None:
        """The page of events, or ``None`` when the tenant has no such run."""

    # -- assistants -----------------------------------------------------------------------

    async def put_assistant(
        self,
        graph_id: str,
        *,
        tenant: str = "",
        assistant_id: str | None = None,
        name: str | None = None,
        description: str | None = None,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        if_exists: IfExists = "raise",
    ) -> Assistant:
        new = control.new_assistant(
            graph_id,
            assistant_id=assistant_id,
            name=name,
            description=description,
            config=config,
            context=context,
            metadata=metadata,
            if_exists=if_exists,
        )
        if assistant_id is not None:
            named = await self._assistant_candidates(new.assistant_id, tenant)
            control.check_not_a_graph_name(new.assistant_id, named)
        stored, inserted = await self._put_assistant(new, tenant)
        return stored if inserted else control.existing_assistant(stored, tenant, if_exists)

    async def get_assistant(self, assistant_id: str, *, tenant: str = "") -> Assistant:
        found = await self._find_assistant(assistant_id, tenant)
        if found is None:
            raise AssistantNotFoundError(control.no_assistant(assistant_id))
        return found

    # -- threads --------------------------------------------------------------------------

    async def put_thread(
        self,
        *,
        tenant: str = "",
        thread_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        if_exists: IfExists = "raise",
    ) -> tuple[Thread, bool]:
        thread_id = new_id() if thread_id is None else check_id(thread_id, "thread_id")
        control.check_if_exists(if_exists)
        meta = encode(dict(check_mapping(metadata, "metadata")), "metadata", searchable=True)
        stored, inserted = await self._put_thread(thread_id, tenant, meta)
        if not inserted:
            control.existing_thread(stored.tenant_id, thread_id, tenant, if_exists)
        return stored, inserted

    async def get_thread(self, thread_id: str, *, tenant: str = "") -> Thread:
        found = await self._find_thread(thread_id, tenant)
        if found is None:
            raise ThreadNotFoundError(control.no_thread(thread_id))
        return found

    async def list_threads(
        self,
        *,
        tenant: str = "",
        status: ThreadStatus | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> builtins.list[Thread]:
        control.check_page(limit, offset)
        filters = check_mapping(metadata, "metadata")
        encode(dict(filters), "metadata filter", searchable=True)
        return await self._list_threads(tenant, status, filters, limit, offset)

    async def delete_thread(self, thread_id: str, *, tenant: str = "") -> None:
        if not await self._delete_thread(thread_id, tenant):
            raise ThreadNotFoundError(control.no_thread(thread_id))

    # -- runs -----------------------------------------------------------------------------

    async def create_run(self, request: NewRun, *, tenant: str = "") -> Created:
        valid, assistant = await self._checked(request, tenant, datetime.now(UTC))
        return await self._create_run(valid, assistant, tenant)

    async def _checked(
        self, request: NewRun, tenant: str, now: datetime
    ) -> tuple[ValidRun, Assistant]:
        """The request checked, over its assistant's options, and the assistant."""
        valid = validate(request, now=now)
        assistant = await self.get_assistant(valid.assistant_id, tenant=tenant)
        return control.with_assistant(valid, assistant), assistant

    async def get_run(self, run_id: str, *, tenant: str = "") -> Run:
        found = await self._find_run(run_id, tenant)
        if found is None:
            raise RunNotFoundError(control.no_run(run_id))
        return found

    async def list_runs(
        self,
        *,
        tenant: str = "",
        thread_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Run]:
        control.check_page(limit, offset)
        return await self._list_runs(tenant, thread_id, status, limit, offset)

    async def cancel_run(
        self,
        run_id: str,
        *,
        tenant: str = "",
        action: CancelAction = "interrupt",
        reason: str | None = None,
    ) -> Run:
        return await self._cancel_run(run_id, tenant, control.check_action(action), reason)

    async def resume_run(
        self,
        run_id: str,
        command: Mapping[str, Any],
        *,
        tenant: str = "",
        events: Sequence[NewEvent] = (),
    ) -> Run:
        sealed = control.resume_input(command, run_id, self.rows.sealer)
        return await self._resume_run(run_id, tenant, sealed, events)

    async def add_events(self, run_id: str, events: Sequence[NewEvent], *, tenant: str = "") -> int:
        return await self._add_events(run_id, tenant, events)

    async def events(
        self,
        run_id: str,
        *,
        tenant: str = "",
        after: int = 0,
        limit: int = 1000,
        kinds: Sequence[str] | None = None,
    ) -> builtins.list[RunEvent]:
        control.check_page(limit, after, offset_name="after")
        page = await self._events(run_id, tenant, after, limit, kinds)
        if page is None:
            raise RunNotFoundError(control.no_run(run_id))
        return page
