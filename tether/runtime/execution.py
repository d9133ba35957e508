"""Executing one claimed run: choose the input, stream the graph, write the outcome.

Which input to pass never depends on ``state.next`` (design §3.5.1). Every
checkpoint the run writes carries ``tether_input = "<run id>:<resumes>"``; a
worker that finds the thread's latest checkpoint stamped with the current token
continues from it (input ``None``), which also finishes a run killed between a
task's writes and the next checkpoint (LangGraph then applies the pending
writes). Otherwise it applies the run's input or command.

The stream runs under a :class:`~tether.runtime.context.RunContext` guard, so
the step layer checks the lease, cancel requests and the deadline before every
model call and tool effect, and the worker checks them again between
supersteps. Events are buffered and written in fenced batches by a flusher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from tether.boundaries import (
    LeaseLostError,
    RunCancelledError,
    RunHandedBackError,
    RunStopped,
    RunTimedOutError,
    guarding,
)
from tether.compensation import compensating_graph, stopped_run
from tether.runtime import lifecycle
from tether.runtime._cancelling import cancel_watchdog
from tether.runtime._timeouts import (
    OBSERVER_KEY,
    attempt_observer,
    deadline_watchdog,
    with_step_timeout,
)
from tether.runtime.compensations import (
    CONTINUES,
    compensate_run,
    continue_compensation,
    execution_of,
    rollback_may_delete,
    rollback_reason,
    summary,
)
from tether.runtime.context import RunContext
from tether.runtime.errors import FenceLostError, InvalidRunRequestError, ThreadNotFoundError
from tether.runtime.graph_store import SharedStore, TenantStore
from tether.runtime.models import Run
from tether.runtime.project import Project
from tether.runtime.saver import RunSaver
from tether.runtime.store.base import KEEP, Claim, NewEvent, Outcome, RunStore
from tether.runtime.store.transient import is_transient
from tether.runtime.store.validation import check_run_config
from tether.runtime.streaming import (
    EventMapper,
    error_event,
    graph_stream,
    metadata_event,
    to_json,
)
from tether.runtime.webhooks import WebhookSender, webhook_payload
from tether.steps import BUDGET_ROOT_KEY as ROOT_KEY
from tether.steps import forget_thread

__all__ = ["Execution", "input_token"]

log = logging.getLogger("tether.runtime")

_FLUSH_EVERY = 0.02  # seconds an event may wait before it is written
_FLUSH_BATCH = 64
_RETRY = "retry"  # an outcome of _outcome: hand the run back, spending an attempt


def _retried(run: Run, error: Exception) -> bool:
    """Whether ``error`` is a store error that passes on its own (the database, not the
    graph) and the run has attempts left: then it runs again (neither failed nor undone);
    on its last attempt it fails, as for any other error."""
    return is_transient(error) and run.attempt < run.max_attempts


def _failed(run: Run, error: Exception) -> Outcome | str:
    """The outcome of a run whose graph raised ``error``: the run's error, or a retry."""
    if _retried(run, error):
        log.warning("run %s: store error, retrying the run: %s", run.run_id, error)
        return _RETRY
    return lifecycle.failed(error)


def input_token(run: Run) -> str:
    """Identifies "this input of this run": stamped on every checkpoint the run writes."""
    return f"{run.run_id}:{run.resumes}"


def _command(value: Any) -> Command[Any]:
    if not isinstance(value, dict):
        raise TypeError(f"a run's command must be a JSON object, not {type(value).__name__}")
    return Command(
        resume=value.get("resume"),
        update=value.get("update"),
        goto=value.get("goto") or (),
    )


@dataclass
class Execution:
    """Everything one worker process shares between the runs it executes."""

    store: RunStore
    project: Project
    saver: RunSaver
    worker_id: str
    on_event: Callable[[], None] | None = None
    graph_store: SharedStore | None = None
    """LangGraph's store, given to every graph as one tenant's (see ``graph_store``)."""
    webhooks: WebhookSender | None = None
    """Sends the ``webhook`` of a run that ended (see :mod:`.webhooks`)."""
    _tenant_stores: dict[str, TenantStore] = field(default_factory=dict, repr=False)

    def _store_of(self, tenant: str) -> TenantStore | None:
        """The run's tenant's store: one per tenant, so its graphs are bound once."""
        if self.graph_store is None:
            return None
        found = self._tenant_stores.get(tenant)
        if found is None:
            loop = asyncio.get_running_loop()
            found = self._tenant_stores[tenant] = TenantStore(self.graph_store, tenant, loop)
        return found

    async def run(self, claim: Claim, ctx: RunContext) -> Run | None:
        """Execute ``claim`` to an outcome and write it; ``None`` when the run was lost."""
        run = claim.run
        hold = claim.hold
        forget_thread(self.saver, run.thread_id)
        done = asyncio.Event()
        flusher = asyncio.create_task(self._flush_loop(ctx, hold, done))
        try:
            with guarding(ctx):
                outcome = await self._outcome(run, ctx)
        finally:
            # Not cancelled: a batch being written when the run ends would be lost.
            done.set()
            await flusher
            forget_thread(self.saver, run.thread_id)
        if outcome is None:
            await self._hand_back_if_still_held(hold)
            return None
        if outcome == _RETRY:
            return await self._retry(ctx, hold)
        try:
            if isinstance(outcome, str):  # "release"
                await self._flush(ctx, hold)
                return await self.store.release(hold, reason="worker stopping")
            # The last events go in the outcome's own transaction: one write, not two.
            with _taken_events(ctx) as events:
                finished = await self.store.finish(hold, outcome, events)
        except (FenceLostError, LeaseLostError):
            log.warning("run %s: lease lost before its outcome was written", run.run_id)
            return None
        await self._send_webhook(finished, outcome)
        return finished

    async def _send_webhook(self, run: Run, outcome: Outcome) -> None:
        """Once the outcome is written: POST it to the run's ``webhook``, if it has one."""
        url = run.kwargs.get("webhook")
        if self.webhooks is None or not isinstance(url, str):
            return
        shown = run.as_langgraph()
        if shown is None:  # rolled back: the run no longer exists to be shown
            return
        values = outcome.values
        if values is KEEP:  # the thread kept its state: send that
            with contextlib.suppress(ThreadNotFoundError):
                values = (await self.store.get_thread(run.thread_id, tenant=run.tenant_id)).values
        values = None if values is KEEP else values
        payload = webhook_payload(
            shown,
            values=values,
            started_at=run.started_at,
            ended_at=run.ended_at,
            error=run.error,
            allowed_fields=self.webhooks.policy.allowed_fields,
        )
        self.webhooks.send(url, payload, run_id=run.run_id)

    async def _outcome(self, run: Run, ctx: RunContext) -> Outcome | str | None:
        kwargs = dict(run.kwargs)
        try:
            check_run_config(kwargs)
            config = self._config(run, ctx)
            await self._check_budget_root(run, config)
            async with self.project.graph(
                run.graph_id,
                cast(RunnableConfig, config),
                self.saver,
                store=self._store_of(run.tenant_id),
            ) as loaded:
                if CONTINUES in run.kwargs:  # a decision or a rollback: compensate
                    return await continue_compensation(
                        self.store, loaded, run, config, ctx, saver=self.saver
                    )
                graph = loaded
                if ctx.step_timeout is not None:
                    graph, ctx.timed_nodes = with_step_timeout(loaded, ctx.step_timeout)
                payload = await self._input(run, config)
                if payload is not _CONTINUE and kwargs.get("checkpoint_id"):
                    config["configurable"]["checkpoint_id"] = kwargs["checkpoint_id"]
                given = None if payload is _CONTINUE else payload
                return await self._drive((graph, loaded), given, config, run, ctx=ctx)
        except RunTimedOutError as error:
            where = ctx.stopped_at or "step"
            ctx.events.add("timeout", {"kind": "run", "reason": "deadline passed", "at": where})
            return lifecycle.timed_out(str(error))
        except RunHandedBackError:
            return "release"
        except (LeaseLostError, FenceLostError):
            log.warning("run %s: lease lost (fence %s); dropping it", run.run_id, ctx.fence.token)
            return None
        except Exception as error:
            ctx.events.add(*error_event(error))
            return _failed(run, error)

    async def _drive(
        self,
        graphs: tuple[Any, Any],
        payload: Any,
        config: dict[str, Any],
        run: Run,
        *,
        ctx: RunContext,
    ) -> Outcome:
        """Stream the run to its end; a cancel, or a failure of a compensating graph, ends it here.

        ``graphs``: the graph to run (maybe a copy with step timeouts) and the project's own.
        """
        graph, loaded = graphs
        try:
            async with deadline_watchdog(ctx), cancel_watchdog(ctx):
                await self._stream(graph, payload, config, run, ctx)
            config["configurable"].pop("checkpoint_id", None)
            state = await graph.aget_state(cast(RunnableConfig, config))
            stopped = stopped_run(loaded, state.values)
            if stopped is not None:  # an approval expired under Stop: the run ends undone
                await self._compensate(loaded, run, config, ctx, stopped)
            return lifecycle.completed(
                to_json(state.values), state.next, state.interrupts, state.tasks
            )
        except RunCancelledError as stop:
            return await self._cancelled((graph, loaded), run, config, stop, ctx)
        except Exception as error:
            if (
                isinstance(error, RunStopped | FenceLostError)
                or _retried(run, error)  # run again, not undone
                or not compensating_graph(loaded)
            ):
                raise
            return await self._compensated_failure(loaded, run, config, ctx, error)

    async def _cancelled(
        self,
        graphs: tuple[Any, Any],
        run: Run,
        config: dict[str, Any],
        stop: RunCancelledError,
        ctx: RunContext,
    ) -> Outcome:
        """``graphs`` as :meth:`_drive` takes them; the project's says if the run compensates."""
        graph, loaded = graphs
        config["configurable"].pop("checkpoint_id", None)
        reason = stop.reason or ""
        if stop.action == "rollback":
            complete = True
            if compensating_graph(loaded):
                # Before the rollback deletes the run's records: they say what it did.
                done = await self._compensate(loaded, run, config, ctx, rollback_reason(reason))
                reason = f"{reason}; {summary(done)}" if reason else summary(done)
                complete = rollback_may_delete(done)
            if complete:  # else the continuation that completes the compensation deletes them
                await self.saver.adelete_for_runs(execution_of(run))
        state = await graph.aget_state(config)
        return lifecycle.cancelled(
            stop.action, reason, values=to_json(state.values), next_nodes=state.next
        )

    async def _compensated_failure(
        self, graph: Any, run: Run, config: dict[str, Any], ctx: RunContext, error: Exception
    ) -> Outcome:
        """The run failed: compensate what it did, and say so in its error."""
        ctx.events.add(*error_event(error))
        config["configurable"].pop("checkpoint_id", None)
        why = f"{type(error).__name__}: {error}"
        return lifecycle.failed(
            error, compensation=await self._compensate(graph, run, config, ctx, why)
        )

    async def _compensate(
        self, graph: Any, run: Run, config: dict[str, Any], ctx: RunContext, reason: str
    ) -> dict[str, Any]:
        """Compensate the run's effects (see tether.compensation); the report as JSON.

        The report is also a ``compensation`` run event. A compensation that
        raises is logged and reported; calling ``compensate`` again continues it.
        """
        try:
            report = await compensate_run(graph, config, run, reason)
        except (RunStopped, FenceLostError):
            raise
        except Exception as exc:  # the run's outcome is still written
            log.exception("run %s: compensation failed", run.run_id)
            body = {"reason": reason, "error": f"{type(exc).__name__}: {exc}"}
            ctx.events.add("compensation", body)
            return body
        body = report.to_dict(args=False)
        ctx.events.add("compensation", body)
        return body

    def _config(self, run: Run, ctx: RunContext) -> dict[str, Any]:
        given = dict(run.kwargs.get("config") or {})
        configurable = dict(given.get("configurable") or {})
        configurable.update(thread_id=run.thread_id, tenant_id=run.tenant_id)
        # LangGraph tells this observer of each attempt it times: step.timeout events.
        configurable[OBSERVER_KEY] = attempt_observer(ctx.events)
        # As on LangGraph's server, the run's metadata is in its config's (under the keys
        # set here), so it reaches the run's checkpoints and history filters find it.
        metadata = {**(given.get("metadata") or {}), **run.metadata}
        metadata.update(
            run_id=run.run_id,
            tether_input=input_token(run),
            tether_fence=str(ctx.fence.token),
            tether_worker=self.worker_id,
            run_attempt=run.attempt,
            graph_id=run.graph_id,
            assistant_id=run.assistant_id,
        )
        config: dict[str, Any] = {**given, "configurable": configurable, "metadata": metadata}
        config.setdefault("recursion_limit", 25)
        return config

    async def _check_budget_root(self, run: Run, config: dict[str, Any]) -> None:
        """A run may share the budget of another thread of its own tenant, no other.

        ``tether_root_thread_id`` names the thread whose budget a run charges
        (forks share their parent's); one of another tenant would read and charge
        that tenant's budget, and file records under its thread.
        """
        root = config["configurable"].get(ROOT_KEY)
        if root is None or root == run.thread_id:
            return
        try:
            await self.store.get_thread(str(root), tenant=run.tenant_id)
        except ThreadNotFoundError:
            raise InvalidRunRequestError(
                f"config.configurable {ROOT_KEY} {str(root)!r} names no thread of this "
                "run's tenant: a run shares only its own tenant's budgets"
            ) from None

    async def _input(self, run: Run, config: dict[str, Any]) -> Any:
        # Only a claim of this run writes checkpoints stamped with its token, and the
        # first claim of a run is fence 1: before it, there is nothing to continue.
        if run.fence > 1:
            head = await self.saver.aget_tuple(
                {"configurable": {"thread_id": run.thread_id, "checkpoint_ns": ""}}
            )
            if head is not None and (head.metadata or {}).get("tether_input") == input_token(run):
                return _CONTINUE
        if run.input_kind == "command":
            return _command(run.input)
        return run.input

    async def _stream(
        self, graph: Any, payload: Any, config: dict[str, Any], run: Run, ctx: RunContext
    ) -> None:
        kwargs = run.kwargs
        requested = kwargs.get("stream_mode") or ["values"]
        if isinstance(requested, str):
            requested = [requested]
        mapper = EventMapper(requested, subgraphs=bool(kwargs.get("subgraphs")))
        ctx.events.add(*metadata_event(run.run_id, run.attempt))
        options: dict[str, Any] = {}
        for name in ("interrupt_before", "interrupt_after", "context"):
            if kwargs.get(name) is not None:
                options[name] = kwargs[name]
        stream = graph_stream(
            graph,
            payload,
            config,
            requested,
            durability=kwargs.get("durability") or "async",
            **options,
        )
        async with contextlib.aclosing(stream):
            async for ns, mode, chunk in stream:
                for name, data in mapper.map(ns, mode, chunk):
                    ctx.events.add(name, data, "|".join(ns))
                if mode == "checkpoints" and not ns:
                    ctx.check("step")

    async def _retry(self, ctx: RunContext, hold: Any) -> Run | None:
        """Hand a run that met a transient store error back, spending an attempt: it
        continues from its last checkpoint, its recorded steps replayed, on any worker.
        If the store is still unreachable, its lease runs out and a claim takes it over."""
        try:
            await self._flush(ctx, hold)
            return await self.store.release(hold, reason="store error", retry=True)
        except (FenceLostError, LeaseLostError):
            return None
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("run %s: handing back failed; its lease will run out", hold.run_id)
            return None

    async def _hand_back_if_still_held(self, hold: Any) -> None:
        """After a lost lease: if the store still says this worker holds the run (the loss
        was only in doubt), hand it back for any worker to continue; otherwise (another
        worker took it over) the fenced release writes nothing."""
        try:
            await self.store.release(hold, reason="lease in doubt")
            log.warning("run %s: lease was in doubt; handed back", hold.run_id)
        except (FenceLostError, LeaseLostError):
            pass
        except Exception:
            log.exception("run %s: handing back after a lost lease failed", hold.run_id)

    async def _flush(self, ctx: RunContext, hold: Any) -> None:
        with _taken_events(ctx) as events:
            if events:
                await self.store.append_events(hold, events)

    async def _flush_loop(self, ctx: RunContext, hold: Any, done: asyncio.Event) -> None:
        """Write the buffered events: the first batch as soon as it is there (it holds
        ``metadata``, the first frame a client streaming the run waits for), then
        every ``_FLUSH_EVERY`` seconds."""
        await _first_event(ctx, done)
        while not done.is_set():
            if len(ctx.events) > 0:
                try:
                    await self._flush(ctx, hold)
                except (FenceLostError, LeaseLostError):
                    ctx.lost = True
                    return
                except Exception:  # a transient store error: the final flush retries
                    log.exception("run %s: writing events failed", ctx.fence.run_id)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), _FLUSH_EVERY)


@contextlib.contextmanager
def _taken_events(ctx: RunContext) -> Iterator[list[NewEvent]]:
    """The run's buffered events, taken to be written; put back if the write fails
    (the next write then sends them, in order)."""
    batch = ctx.events.take()
    try:
        yield [NewEvent(e.kind, e.data, e.ns) for e in batch]
    except BaseException:
        ctx.events.put_back(batch)
        raise


async def _first_event(ctx: RunContext, done: asyncio.Event) -> None:
    """Until the run's first event is buffered (or the run is over)."""
    loop = asyncio.get_running_loop()
    first = asyncio.Event()

    def wake() -> None:  # a sync node adds events from a pool thread
        loop.call_soon_threadsafe(first.set)

    ctx.events.wake = wake
    try:
        if len(ctx.events) == 0:
            waits = {asyncio.ensure_future(first.wait()), asyncio.ensure_future(done.wait())}
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
    finally:
        ctx.events.wake = None


class _Continue:
    """Continue from the latest checkpoint (input ``None``)."""


_CONTINUE = _Continue()
