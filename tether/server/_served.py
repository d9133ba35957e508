"""What the routes share: the runtime, the project, and the calls the Runtime lacks.

:class:`Served` is the one object the routes talk to. Most calls go straight to
:class:`~tether.runtime.Runtime`; a few the HTTP API needs and the Runtime does
not offer yet are composed here from public pieces (``Runtime.store``,
``Runtime.checkpointer()``, the project's graphs):

- thread state and history: read through the thread's graph, compiled with the
  runtime's checkpointer, as LangGraph's server does (state updates:
  :mod:`._state`);
- deleting a stateless run's temporary thread once its result was sent;
- the ``join`` body (design §2.9).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from fastapi import Request
from langchain_core.runnables import RunnableConfig
from langgraph.errors import InvalidUpdateError

from tether.debug import DebugError, timeline
from tether.runtime import Run, Runtime, Thread, WebhookRefusedError
from tether.runtime import project as projects
from tether.server._errors import ApiError
from tether.server._mapping import empty_state, state_json
from tether.steps import read_steps

__all__ = ["Served", "served"]

_PAGE = 1000


@dataclass
class Served:
    """The runtime and project behind one app."""

    runtime: Runtime
    project: projects.Project

    async def authorize_thread(self, thread_id: str, action: str) -> None:
        """Raise unless the caller may do ``threads.<action>`` on the thread (``auth.path``
        projects check their handlers; tenants are checked by the runtime's reads)."""

    @property
    def has_handlers(self) -> bool:
        """Whether :meth:`authorize_thread` asks a project's ``@auth.on`` handlers."""
        return False

    async def check_webhook(self, url: str | None) -> None:
        """Refuse (422) a webhook URL the project's ``webhooks`` policy does not allow."""
        if url is None:
            return
        try:
            await self.project.webhooks.check_resolved(url)
        except WebhookRefusedError as refused:
            raise ApiError(422, str(refused)) from None

    async def discard_thread(self, thread_id: str) -> None:
        """Delete a thread this request itself created and could not finish (a half-made fork):
        no ``threads.delete`` check, since it is the request's own undo."""
        await self.runtime.delete_thread(thread_id)

    # -- threads ----------------------------------------------------------------------------

    async def thread_graph(self, thread: Thread) -> str | None:
        """The graph whose state the thread holds: its newest run's, else its metadata's,
        else the one its newest checkpoint names (a copied thread, or one whose runs
        were deleted)."""
        runs = await self.runtime.list(thread_id=thread.thread_id, limit=1)
        if runs:
            return runs[0].graph_id
        graph_id = thread.metadata.get("graph_id")
        if isinstance(graph_id, str):
            return graph_id
        saver = await self.runtime.checkpointer()
        head = await saver.aget_tuple(self.config(thread.thread_id, None))
        graph_id = None if head is None else (head.metadata or {}).get("graph_id")
        return graph_id if isinstance(graph_id, str) else None

    def config(self, thread_id: str, checkpoint: Mapping[str, Any] | None) -> RunnableConfig:
        """The config addressing the thread's checkpoint (its newest without one).

        Raises:
            ApiError: 422 when ``checkpoint`` holds an id or namespace that is not a
                string, or a ``checkpoint_map`` that is not an object of strings.
        """
        configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
        for key, value in (checkpoint or {}).items():
            if key in ("checkpoint_id", "checkpoint_ns", "checkpoint_map") and value is not None:
                configurable[key] = _checked_address(key, value)
        return cast(RunnableConfig, {"configurable": configurable})

    async def require_checkpoint(
        self, thread_id: str, checkpoint: Mapping[str, Any] | None
    ) -> None:
        """404 unless the thread has the checkpoint ``checkpoint`` names (none named: fine).

        LangGraph reads a checkpoint it does not have as an empty state, and
        updates or runs from it as if the thread were new: a mistyped id would
        answer "empty" or replace the thread's state. The thread was checked
        to be the caller's first.
        """
        configurable = self.config(thread_id, checkpoint)["configurable"]
        wanted = configurable.get("checkpoint_id")
        if wanted is not None:
            await self.runtime.require_checkpoint(thread_id, wanted, configurable["checkpoint_ns"])

    async def state(
        self,
        thread_id: str,
        checkpoint: Mapping[str, Any] | None = None,
        *,
        subgraphs: bool = False,
    ) -> dict[str, Any]:
        """LangGraph's ``ThreadState`` of the thread (at ``checkpoint``, if given)."""
        thread = await self.runtime.get_thread(thread_id)
        graph_id = await self.thread_graph(thread)
        if graph_id is None or graph_id not in self.project.graph_ids:
            await self.require_checkpoint(thread_id, checkpoint)
            return empty_state(thread_id)
        config = self.config(thread_id, checkpoint)
        saver = await self.runtime.checkpointer()
        async with self.project.graph(graph_id, config, saver) as graph:
            if await saver.aget_tuple(config) is None:
                await self.require_checkpoint(thread_id, checkpoint)  # 404 if one was named
                return empty_state(thread_id)
            with _unreadable_state(thread_id):
                snapshot = await graph.aget_state(config, subgraphs=subgraphs)
        return state_json(snapshot)

    async def steps(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's step log as JSON, oldest first (for ``tether.debug`` timelines).

        Read-only; the thread is looked up through the runtime first, so a
        caller sees only the steps of a thread it may read (tenant and auth).
        """
        await self.runtime.get_thread(thread_id)
        saver = await self.runtime.checkpointer()
        return [step.to_json() for step in await read_steps(saver, thread_id)]

    async def replay(self, thread_id: str, upto: str | None) -> dict[str, Any]:
        """Replay the thread from its step log with this server's graph code (``tether.debug``).

        Nothing is asked of the model and no durable tool runs; each super-step
        runs in a scratch thread of the checkpointer that is deleted afterwards,
        so the thread and the run store are left as they were.
        """
        thread = await self.runtime.get_thread(thread_id)
        # it runs the graph's node code (plain tools included): as much as starting a run
        await self.authorize_thread(thread_id, "create_run")
        graph_id = await self.thread_graph(thread)
        if graph_id is None or graph_id not in self.project.graph_ids:
            raise ApiError(409, f"thread {thread_id!r} has no graph of this project to replay")
        saver = await self.runtime.checkpointer()
        async with self.project.graph(graph_id, self.config(thread_id, None), saver) as graph:
            try:
                found = await timeline(saver, thread_id, graph=graph)
                result = await found.replay(upto, check=False, keep=False)
            except DebugError as exc:  # no checkpoints yet, an `upto` not on the thread
                raise ApiError(422, str(exc)) from exc
        return result.to_json()

    async def history(
        self,
        thread_id: str,
        *,
        limit: int,
        before: Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None,
        checkpoint: Mapping[str, Any] | None,
    ) -> list[dict[str, Any]]:
        """The thread's states, newest first (LangGraph's ``POST /threads/{id}/history``)."""
        thread = await self.runtime.get_thread(thread_id)
        graph_id = await self.thread_graph(thread)
        if graph_id is None or graph_id not in self.project.graph_ids:
            return []
        config = self.config(thread_id, checkpoint)
        saver = await self.runtime.checkpointer()
        states = []
        async with self.project.graph(graph_id, config, saver) as graph:
            try:
                with _unreadable_state(thread_id):
                    async for snapshot in graph.aget_state_history(
                        config,
                        limit=limit,
                        before=self.config(thread_id, before) if before else None,
                        filter=dict(metadata) if metadata else None,
                    ):
                        states.append(state_json(snapshot))
            except ValueError as exc:
                if not metadata:
                    raise
                # the SQLite checkpointer takes only keys of letters, digits, _ . and -
                raise ApiError(422, f"metadata cannot filter the history: {exc}") from None
        return states

    async def delete_thread(self, thread_id: str) -> None:
        """Delete the thread, its runs and events, then its checkpoints."""
        await self.runtime.delete_thread(thread_id)

    async def discard_temporary(self, run: Run) -> None:
        """Delete a stateless run's temporary thread once its result was sent (design
        §2.5); a thread another call deleted first is fine."""
        try:
            thread = await self.runtime.get_thread(run.thread_id)
            if thread.temporary and thread.status != "busy":
                await self.runtime.delete_thread(run.thread_id)
        except LookupError:
            return

    # -- runs -------------------------------------------------------------------------------

    async def join_body(self, run: Run) -> Any:
        """What ``join`` and ``wait`` answer for a run that has stopped (design §2.9), as
        LangGraph's server answers:

        - the last ``error`` event as ``{"__error__": ...}``;
        - else, if the run stopped at interrupts, its root ``values`` or ``updates`` events
          that carry them: the one, or ``{"__interrupt__": [...]}`` with all of them (two
          nodes interrupting in one step are two events);
        - else the data of the last root ``values`` event;
        - else the thread as it is now.
        """
        last_values: Any = None
        found_values = False
        interrupted: list[Any] = []
        after = 0
        while True:
            page = await self.runtime.events(
                run.run_id, after=after, limit=_PAGE, kinds=("values", "updates", "error")
            )
            for event in page:
                if event.kind == "error":
                    return {"__error__": event.data}
                if event.ns:
                    continue
                if _interrupts_in(event.data):
                    interrupted.append(event.data)
                elif event.kind == "values":
                    last_values, found_values = event.data, True
            if len(page) < _PAGE:
                break
            after = page[-1].seq
        if run.status == "error" and run.error:
            return {"__error__": dict(run.error)}
        if len(interrupted) > 1:
            return {"__interrupt__": [i for data in interrupted for i in _interrupts_in(data)]}
        if interrupted:
            return interrupted[0]
        if found_values:
            return last_values
        return await self._thread_values(run.thread_id)

    async def _thread_values(self, thread_id: str) -> Any:
        try:
            thread = await self.runtime.get_thread(thread_id)
        except LookupError:
            return {}
        if thread.status == "error" and thread.error:
            return {"__error__": dict(thread.error)}
        if thread.status == "interrupted" and thread.interrupts:
            return {"__interrupt__": [i for items in thread.interrupts.values() for i in items]}
        return thread.values if thread.values is not None else {}


@contextmanager
def _unreadable_state(thread_id: str) -> Iterator[None]:
    """A state LangGraph cannot assemble (its pending writes conflict: two tasks of one step
    wrote a key that takes one value) is the thread's problem, not the server's: 400, as
    LangGraph's server answers."""
    try:
        yield
    except InvalidUpdateError as exc:
        raise ApiError(400, f"the state of thread {thread_id!r} cannot be read: {exc}") from None


def _interrupts_in(data: Any) -> list[Any]:
    found = data.get("__interrupt__") if isinstance(data, dict) else None
    return found if isinstance(found, list) else []


def _checked_address(key: str, value: Any) -> Any:
    """A ``checkpoint`` field as LangGraph takes it, or a 422 naming the field."""
    if key == "checkpoint_map":
        if isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            return value
        raise ApiError(422, "checkpoint.checkpoint_map must be an object of strings")
    if not isinstance(value, str):
        raise ApiError(422, f"checkpoint.{key} must be a string, got {type(value).__name__}")
    return value


def served(request: Request) -> Served:
    """The app's :class:`Served`, acting for the request's caller (a FastAPI dependency):
    its runtime is scoped to the caller's tenant (and, with an ``auth.path``, goes
    through the project's ``@auth.on`` handlers)."""
    from tether.server._caller import caller

    found: Served = request.app.state.tether
    scoped: Served = request.app.state.tether_scope(found, caller(request))
    return scoped
