"""``Runtime``: the control plane in Python (create, read, wait, cancel, resume, events).

Workers execute; a :class:`Runtime` only writes rows and reads them. It can run
in any process (a web server, a notebook, a CLI) against the same database as
the workers::

    async with Runtime("postgresql://…/app") as rt:
        run = await rt.create("refund", thread_id="ticket-42", input={"messages": [...]})
        run = await rt.wait(run.run_id)
        async for event in rt.follow(run.run_id):
            print(event.seq, event.kind)

Every call is scoped to one tenant (``tenant=`` or :meth:`Runtime.scoped`); a
run or thread of another tenant is reported as not found.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import time
from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether._text import text_problem
from tether.approvals import DecisionResult
from tether.checkpointing import open_checkpointer, redact
from tether.runtime.crons import CronMethods
from tether.runtime.errors import (
    AlreadyExistsError,
    CheckpointNotFoundError,
    InvalidRunRequestError,
    RunNotActiveError,
    RunNotFoundError,
)
from tether.runtime.ids import check_id, new_id
from tether.runtime.models import (
    ACTIVE,
    CancelAction,
    IfNotExists,
    MultitaskStrategy,
    OnCompletion,
    Run,
    RunEvent,
    RunStatus,
    StreamMode,
    Thread,
)
from tether.runtime.multitask import TETHER_RUN_MARK, superseded_reason
from tether.runtime.notify import Notifier
from tether.runtime.store import open_run_store
from tether.runtime.store.base import Created, NewEvent, RunStore
from tether.runtime.store.requests import run_request
from tether.runtime.store.types import NewRun
from tether.runtime.store.validation import validate
from tether.runtime.worker import checkpointer_options, notifier_for, register_graphs

__all__ = ["Runtime"]

WAIT_POLL = 1.0  # seconds: how stale a wait may get when a signal was missed


class Runtime(CronMethods):
    """The runs of one run store, as seen by one tenant.

    Args:
        url: The run store (``postgresql://…`` or ``sqlite:///path``).
        checkpoints_url: Where the workers keep checkpoints (default: ``url``);
            opened only by the calls that need checkpoints (rollback, decide).
        tenant: The tenant every call acts for (``""``: the default tenant).
        graphs: Graph ids whose shared assistants to create on opening (workers
            create them for their project's graphs too), so runs of them can be
            created before any worker has started.
        checkpointer_options: Passed to :func:`tether.open_checkpointer`;
            ``encryption`` also seals the run store's private values (runs'
            inputs and errors, threads' values and interrupts, event data).
    """

    def __init__(
        self,
        url: str,
        *,
        checkpoints_url: str | None = None,
        tenant: str = "",
        graphs: Sequence[str] = (),
        **checkpointer_options: Any,
    ) -> None:
        self.url = url
        self.checkpoints_url = checkpoints_url or url
        self.tenant = check_id(tenant, "tenant") if tenant != "" else tenant
        self._options = checkpointer_options
        self._stack: AsyncExitStack | None = None
        self._store: RunStore | None = None
        self._notifier: Notifier | None = None
        self._saver: BaseCheckpointSaver[Any] | None = None
        self._parent: Runtime | None = None
        self._graphs = tuple(graphs)

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        stack = AsyncExitStack()
        try:
            store = await stack.enter_async_context(
                open_run_store(self.url, encryption=self._options.get("encryption"))
            )
            await store.setup()
            if not store.rows.sealer.enabled:
                await store.refuse_sealed(redact(self.url))
            await register_graphs(store, self._graphs)
            notifier = notifier_for(self.url, store)
            await notifier.start()
            stack.push_async_callback(notifier.aclose)
        except BaseException:
            await stack.aclose()
            raise
        self._stack, self._store, self._notifier = stack, store, notifier
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()
        self._store = self._notifier = self._saver = None

    def scoped(self, tenant: str) -> Runtime:
        """The same open runtime acting for ``tenant``."""
        other = Runtime(
            self.url, checkpoints_url=self.checkpoints_url, tenant=tenant, **self._options
        )
        other._parent = self._parent or self  # the open one, however deeply scoped
        return other

    @property
    def store(self) -> RunStore:
        root = self._parent or self
        if root._store is None:
            raise RuntimeError("the Runtime is not open: use `async with Runtime(url) as rt:`")
        return root._store

    @property
    def notifier(self) -> Notifier:
        root = self._parent or self
        if root._notifier is None:
            raise RuntimeError("the Runtime is not open: use `async with Runtime(url) as rt:`")
        return root._notifier

    async def checkpointer(self) -> BaseCheckpointSaver[Any]:
        """The workers' checkpointer, opened on first use."""
        root = self._parent or self
        if root._saver is None:
            if root._stack is None:
                raise RuntimeError("the Runtime is not open")
            root._saver = await root._stack.enter_async_context(
                open_checkpointer(root.checkpoints_url, **checkpointer_options(root._options))
            )
        return root._saver

    # -- threads --------------------------------------------------------------------------

    async def create_thread(
        self, *, thread_id: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> Thread:
        return await self.store.create_thread(
            tenant=self.tenant, thread_id=thread_id, metadata=metadata
        )

    async def get_thread(self, thread_id: str) -> Thread:
        return await self.store.get_thread(thread_id, tenant=self.tenant)

    async def delete_thread(self, thread_id: str) -> None:
        """Delete the thread with its runs and events, then its checkpoints.

        Raises:
            ThreadNotFoundError: missing or foreign.
        """
        await self.store.delete_thread(thread_id, tenant=self.tenant)
        await (await self.checkpointer()).adelete_thread(thread_id)

    async def delete_temporary_threads(self, *, grace: float = 0) -> builtins.list[str]:
        """Delete the temporary threads of stateless runs (``on_completion="delete"``)
        whose runs all stopped more than ``grace`` seconds ago, of every tenant, with
        their runs, events and checkpoints; their ids. The scheduler does it too, with
        a grace of :data:`tether.runtime.temporary.GRACE`."""
        from tether.runtime.temporary import delete_temporary_threads

        before = datetime.now(UTC) - timedelta(seconds=grace)
        return await delete_temporary_threads(
            self.store, await self.checkpointer(), ended_before=before
        )

    # -- runs -----------------------------------------------------------------------------

    async def create(
        self,
        assistant_id: str,
        *,
        thread_id: str | None = None,
        input: Any = None,
        command: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        multitask_strategy: MultitaskStrategy = "enqueue",
        if_not_exists: IfNotExists = "create",
        on_completion: OnCompletion | None = None,
        after_seconds: float = 0,
        deadline: datetime | timedelta | None = None,
        step_timeout: float | None = None,
        stream_mode: StreamMode | Sequence[StreamMode] = "values",
        stream_subgraphs: bool = False,
        interrupt_before: Sequence[str] | None = None,
        interrupt_after: Sequence[str] | None = None,
        checkpoint_id: str | None = None,
        durability: Literal["sync", "async", "exit"] | None = None,
        run_id: str | None = None,
        webhook: str | None = None,
    ) -> Run:
        """Enqueue a run of ``assistant_id`` (an assistant or graph id); it is ``pending``."""
        if multitask_strategy == "rollback" and thread_id is not None:
            run_id = new_id() if run_id is None else check_id(run_id, "run_id")
        request = run_request(
            assistant_id,
            thread_id=thread_id,
            input=input,
            command=command,
            config=config,
            context=context,
            metadata=metadata,
            multitask_strategy=multitask_strategy,
            if_not_exists=if_not_exists,
            on_completion=on_completion,
            after_seconds=after_seconds,
            deadline=deadline,
            step_timeout=step_timeout,
            stream_mode=stream_mode,
            stream_subgraphs=stream_subgraphs,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            checkpoint_id=checkpoint_id,
            durability=durability,
            run_id=run_id,
            webhook=webhook,
        )
        if multitask_strategy == "rollback" and thread_id is not None and run_id is not None:
            # Refused before anything is cancelled: a refused create changes nothing.
            await self._refuse(request, thread_id, checkpoint_id)
            await self._roll_back_started(thread_id, run_id)
        elif checkpoint_id is not None:
            await self._check_fork(thread_id, checkpoint_id)
        created = await self.store.create_run(request, tenant=self.tenant)
        await self._after_create(created)
        return created.run

    async def _check_fork(self, thread_id: str | None, checkpoint_id: str) -> None:
        """Refuse a run from a checkpoint its thread does not have, before anything is
        created: LangGraph would start such a run from an empty state, as a new thread."""
        if thread_id is None:
            raise InvalidRunRequestError(
                f"checkpoint_id {checkpoint_id!r} needs a thread_id: a stateless run starts "
                "on a new thread, which has no checkpoints"
            )
        await self.get_thread(thread_id)  # a missing or foreign thread: no thread, as ever
        await self.require_checkpoint(thread_id, checkpoint_id)

    async def require_checkpoint(
        self, thread_id: str, checkpoint_id: str, checkpoint_ns: str = ""
    ) -> None:
        """Raise :class:`CheckpointNotFoundError` unless ``thread_id`` has the checkpoint.

        The caller has checked that the thread is this tenant's (the checkpointer
        does not know tenants).

        Raises:
            InvalidRunRequestError: the id or namespace is not text a store can hold.
        """
        check_id(checkpoint_id, "checkpoint_id")
        if not isinstance(checkpoint_ns, str) or text_problem(checkpoint_ns) is not None:
            raise InvalidRunRequestError(
                f"checkpoint_ns must be text without NUL characters, got {checkpoint_ns!r}"
            )
        config = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        if await (await self.checkpointer()).aget_tuple(config) is None:  # type: ignore[arg-type]
            where = f" in namespace {checkpoint_ns!r}" if checkpoint_ns else ""
            raise CheckpointNotFoundError(
                f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}{where}"
            )

    async def check_create(self, assistant_id: str, **options: Any) -> None:
        """Raise what :meth:`create` with these arguments would raise for the request itself
        (a malformed payload, an unknown assistant, a run id in use, a fork from a missing
        checkpoint), creating nothing: a batch checks every run before it creates one."""
        request = run_request(assistant_id, **options)
        await self._refuse(request, options.get("thread_id"), options.get("checkpoint_id"))

    async def _refuse(
        self, request: NewRun, thread_id: str | None, checkpoint_id: str | None
    ) -> None:
        validate(request, now=datetime.now(UTC))
        await self.store.get_assistant(request.assistant_id, tenant=self.tenant)
        if request.run_id is not None:
            with contextlib.suppress(RunNotFoundError):
                await self.store.get_run(request.run_id, tenant=self.tenant)
                raise AlreadyExistsError(f"run {request.run_id} already exists")
        if checkpoint_id is not None:
            await self._check_fork(thread_id, checkpoint_id)

    async def _roll_back_started(self, thread_id: str, new_run_id: str) -> None:
        """Before a run with multitask ``rollback`` is created: cancel with rollback each
        ``pending`` run of the thread that had already started (re-queued, or resumed).

        Its rollback run (if it recorded tool calls) is then queued ahead of the new run, so a
        worker undoes its effects and deletes its checkpoints before the new run starts.
        Superseded inside the create instead, it would be deleted uncompensated, or left for
        the new run to continue from.
        """
        reason = superseded_reason(new_run_id, "rollback")
        pending = await self.store.list_runs(
            tenant=self.tenant, thread_id=thread_id, status="pending", limit=1000
        )
        for run in pending:
            if TETHER_RUN_MARK not in run.metadata and self._started(run):
                with contextlib.suppress(RunNotActiveError):  # a worker took it meanwhile
                    await self.cancel(run.run_id, action="rollback", reason=reason)

    async def _after_create(self, created: Created) -> None:
        """Delete the checkpoints of runs a multitask ``rollback`` cancelled (a started run
        that became pending after :meth:`_roll_back_started` looked: rare, uncompensated)."""
        for old in created.superseded:
            if old.status == "cancelled" and old.cancel_action == "rollback" and old.attempt:
                await (await self.checkpointer()).adelete_for_runs([old.run_id])

    async def get(self, run_id: str) -> Run:
        return await self.store.get_run(run_id, tenant=self.tenant)

    async def list(
        self,
        *,
        thread_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Run]:
        return await self.store.list_runs(
            tenant=self.tenant, thread_id=thread_id, status=status, limit=limit, offset=offset
        )

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Run:  # noqa: ASYNC109
        """The run once it is no longer ``pending`` or ``running``.

        It reads the run once, then again each time the run is said to have
        stopped (the ``ended`` channel), not on each of its events; a read a
        second serves a missed signal.

        Raises:
            TimeoutError: it still was after ``timeout`` seconds.
        """
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            async with self.notifier.subscribe("ended", run_id) as wake:
                run = await self.get(run_id)
                if run.status not in ACTIVE:
                    return run
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(
                        f"run {run_id} is still {run.status} after {timeout} seconds"
                    )
                await wake.wait(WAIT_POLL if left is None else min(left, WAIT_POLL))

    async def cancel(
        self,
        run_id: str,
        *,
        action: CancelAction = "interrupt",
        reason: str | None = None,
        wait: bool = False,
    ) -> Run:
        """Cancel a run (see :meth:`RunStore.cancel_run`); ``wait`` until it has stopped.

        A run cancelled with ``rollback`` whose rollback was never enqueued (this
        process died in between) is rolled back when it is cancelled with
        ``rollback`` again.
        """
        before = await self.get(run_id)
        if action == "rollback" and await self._rollback_left_undone(before):
            from tether.runtime import compensations

            await compensations.enqueue_rollback(self, before)
            return await self.wait(run_id) if wait else before
        run = await self.store.cancel_run(run_id, tenant=self.tenant, action=action, reason=reason)
        if run.status == "cancelled":
            # Before a rollback deletes the run's records, the approvals' among them.
            await self._cancel_approvals(before, reason or "run cancelled")
            if action == "rollback" and self._started(before):
                await self._roll_back(run)
        if wait:
            run = await self.wait(run_id)
        return run

    async def _rollback_left_undone(self, run: Run) -> bool:
        """Whether ``run`` was cancelled with rollback and still has its records."""
        from tether.runtime import compensations

        if not (run.status == "cancelled" and run.cancel_action == "rollback"):
            return False
        if not self._started(run):
            return False
        return await compensations.acted(self, run)

    @staticmethod
    def _started(run: Run) -> bool:
        """Whether ``run``'s execution began: it was claimed or resumed, or it resumed an
        interrupted run (a ``Command(resume=...)``), whose execution it continues."""
        from tether.runtime import compensations

        return bool(run.attempt or run.resumes or compensations.resumed_by(run))

    async def _roll_back(self, run: Run) -> None:
        """Delete what the cancelled ``run`` wrote; if it recorded tool calls, a worker does,
        after compensating them when its graph compensates (this process may not have it)."""
        from tether.runtime import compensations

        if await compensations.acted(self, run):
            await compensations.enqueue_rollback(self, run)
        else:
            await (await self.checkpointer()).adelete_for_runs(compensations.execution_of(run))

    async def _cancel_approvals(self, run: Run, reason: str, *, by: str = "tether:cancel") -> None:
        """Cancel the approvals ``run`` waited on (event ``approval.cancelled`` each)."""
        ids = [w.approval_id for w in run.waiting_on if w.approval_id]
        if not ids:
            return
        from tether.approvals import cancel_pending

        await cancel_pending(await self.checkpointer(), ids, by=by, reason=reason)
        await self.store.add_events(
            run.run_id,
            [NewEvent("approval.cancelled", {"approval_id": i}) for i in ids],
            tenant=self.tenant,
        )

    async def resume(self, run_id: str, command: Mapping[str, Any]) -> Run:
        """Enqueue an ``interrupted`` run again with ``command`` (``{"resume": …}``).

        Raises:
            InvalidRunRequestError: the run waits on a tether approval, which only a
                checked decision (:meth:`decide`) answers.
        """
        waiting = [w.approval_id for w in (await self.get(run_id)).waiting_on if w.approval_id]
        if waiting:
            raise InvalidRunRequestError(
                f"run {run_id} waits on approval {', '.join(waiting)}: a resume value cannot "
                "answer it; decide it (Runtime.decide, or `tether approvals approve|reject|edit "
                "--runtime`)"
            )
        return await self.store.resume_run(run_id, command, tenant=self.tenant)

    async def decide(
        self,
        thread_id: str | None,
        approval_id: str,
        decision: str,
        *,
        by: str,
        roles: Iterable[str] = (),
        args_sha256: str | None = None,
        edited_args: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> DecisionResult:
        """Decide an approval (every check :func:`tether.approvals.decide` makes) and
        enqueue the waiting run's resume; a worker continues it.

        A compensation request (action ``compensate:<tool>``: an undo of an ended run
        waits on a person) is decided the same way; the decision enqueues a
        continuation run, and a worker continues the compensation and rewrites the
        ended run's outcome (see :mod:`tether.runtime.compensations`).
        """
        from tether.approvals import decide
        from tether.runtime.resumer import RuntimeResumer

        return await decide(
            await self.checkpointer(),
            thread_id,
            approval_id,
            decision,
            resumer=RuntimeResumer(self),
            by=by,
            roles=roles,
            args_sha256=args_sha256,
            edited_args=edited_args,
            reason=reason,
        )

    # -- events ---------------------------------------------------------------------------

    async def events(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int = 1000,
        kinds: Collection[str] | None = None,
        wait: float = 0,
    ) -> builtins.list[RunEvent]:
        """The run's events after seq ``after``; with ``wait``, long-poll until one comes."""
        kind_list = None if kinds is None else list(kinds)
        end = time.monotonic() + wait
        while True:
            async with self.notifier.subscribe("events", run_id) as wake:
                found = await self.store.events(
                    run_id, tenant=self.tenant, after=after, limit=limit, kinds=kind_list
                )
                left = end - time.monotonic()
                if found or left <= 0:
                    return found
                await wake.wait(left)

    async def follow(
        self, run_id: str, *, after: int = 0, kinds: Collection[str] | None = None
    ) -> AsyncIterator[RunEvent]:
        """Every event of the run from ``after`` on, live, until the run stops."""
        while True:
            batch = await self.events(run_id, after=after, kinds=None, wait=1.0)
            for event in batch:
                after = event.seq
                if kinds is None or event.kind in kinds:
                    yield event
            if batch and batch[-1].kind == "run.finished":
                return
            if not batch:
                run = await self.get(run_id)
                if run.status not in ACTIVE:
                    rest = await self.store.events(run_id, tenant=self.tenant, after=after)
                    for event in rest:
                        if kinds is None or event.kind in kinds:
                            yield event
                    return
            await asyncio.sleep(0)
