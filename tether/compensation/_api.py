"""The entry points: ``compensate``, its sync twin, and the resumer a person's decision uses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals import ApprovalRequest, DecisionResult, stopped_by_expiry
from tether.compensation._flow import Context, compensation_flow, live_pass, pending_flow
from tether.compensation._io import run, run_sync
from tether.compensation._report import CompensationReport
from tether.compensation._requests import register_edit_schemas
from tether.compensation._settings import run_policy, settings_of
from tether.compensation._waiting import compensated_run, run_of
from tether.compensation.errors import CompensationConfigError

__all__ = [
    "CompensationResumer",
    "SyncCompensationResumer",
    "compensate",
    "compensate_sync",
    "compensating_graph",
    "stopped_run",
]


def compensating_graph(graph: Any) -> bool:
    """Whether ``graph`` was made with :func:`compensating` (its failed runs are compensated)."""
    return settings_of(graph) is not None


def stopped_run(graph: Any, values: Any) -> str | None:
    """Why a finished run of a compensating ``graph`` is to be compensated, or ``None``.

    A run that ended because an approval expired under a ``Stop`` policy did
    not do what it set out to do: its earlier effects are compensated like a
    failed run's. Read from the final state's ``messages``.
    """
    if not compensating_graph(graph) or not isinstance(values, dict):
        return None
    messages = values.get("messages")
    if isinstance(messages, list) and stopped_by_expiry(messages):
        return "an approval expired and its policy stopped the run"
    return None


def _context(
    graph: Any, config: Any, reason: str | None, run_id: str | None, resumed: Sequence[str] = ()
) -> tuple[Context, BaseCheckpointSaver[Any]]:
    settings = settings_of(graph)
    if settings is None:
        raise CompensationConfigError(
            "this graph does not compensate: build it with "
            "tether.compensation.compensating(graph, approvers=...)"
        )
    checkpointer = getattr(graph, "checkpointer", None)
    if not isinstance(checkpointer, BaseCheckpointSaver):
        raise CompensationConfigError(
            "compensation needs the graph's checkpointer (its records say what the run did): "
            "compile with builder.compile(checkpointer=saver)"
        )
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    if thread_id is None or str(thread_id) == "":
        raise CompensationConfigError(
            "compensate() needs the run's config: {'configurable': {'thread_id': ...}}"
        )
    if reason is not None and (not isinstance(reason, str) or not reason):
        raise CompensationConfigError("reason= must be a non-empty sentence saying why")
    if run_id is not None and (not isinstance(run_id, str) or not run_id):
        raise CompensationConfigError(f"run_id must be a non-empty str, got {run_id!r}")
    if isinstance(resumed, str) or not all(isinstance(r, str) and r for r in resumed):
        raise CompensationConfigError(
            f"resumed must be a sequence of run ids (non-empty str), got {resumed!r}"
        )
    if resumed and run_id is None:
        raise CompensationConfigError("resumed= needs the run_id of the run that resumed them")
    tools = settings.tools_by_name(graph)
    register_edit_schemas(tools)
    ctx = Context(
        settings=settings,
        tools=tools,
        thread_id=str(thread_id),
        reason=reason,
        run_policy=run_policy(config),
        run_id=run_id,
        resumed=tuple(resumed),
    )
    return ctx, checkpointer


async def compensate(
    graph: Any,
    config: Any,
    *,
    reason: str | None = None,
    run_id: str | None = None,
    resumed: Sequence[str] = (),
) -> CompensationReport:
    """Compensate the failed run on ``config``'s thread, newest effect first; or continue doing so.

    Safe to call again at any time (after a crash, after a person decided): what
    was undone stays undone and is not undone twice.

    Args:
        graph: A graph made with :func:`compensating`, over the run's checkpointer.
        config: The run's config (its thread; ``tether_compensation`` in its
            configurable sets the run's policy).
        reason: Why (the run's error, a cancel); shown to people. Later passes
            keep the first pass's.
        run_id: Only the effects this run recorded (the runtime passes its run
            id); default: every effect of the thread.
        resumed: The runs ``run_id`` continued by answering their interrupt (a
            ``Command(resume=...)`` in a new run): their effects are its own.
            Later passes keep the first pass's.

    Returns:
        A :class:`CompensationReport`: what was undone, what was not (and why),
        and what waits on a person.

    Raises:
        CompensationConfigError: The graph does not compensate, has no
            checkpointer, or the config, reason or run policy is malformed.
    """
    ctx, checkpointer = _context(graph, config, reason, run_id, resumed)
    with live_pass(ctx):
        return await run(compensation_flow(ctx), checkpointer)


def compensate_sync(
    graph: Any,
    config: Any,
    *,
    reason: str | None = None,
    run_id: str | None = None,
    resumed: Sequence[str] = (),
) -> CompensationReport:
    """Sync twin of :func:`compensate` (every ``compensate`` hook must then be sync)."""
    ctx, checkpointer = _context(graph, config, reason, run_id, resumed)
    with live_pass(ctx):
        return run_sync(compensation_flow(ctx), checkpointer)


class _ResumerBase:
    """What the async and sync resumers share: the graph, and the result of a pass."""

    def __init__(self, graph: Any) -> None:
        settings = settings_of(graph)
        if settings is None:
            raise CompensationConfigError(
                f"{type(self).__name__} needs the graph made with compensating(...)"
            )
        self.graph = graph
        register_edit_schemas(settings.tools_by_name(graph))

    @staticmethod
    def _config(request: ApprovalRequest) -> dict[str, Any]:
        return {"configurable": {"thread_id": request.thread_id}}

    @staticmethod
    def _result(
        request: ApprovalRequest, doc: dict[str, Any], report: CompensationReport
    ) -> DecisionResult:
        return DecisionResult(
            approval_id=request.approval_id,
            decision=doc,
            pending=[
                {"type": "tether.approval", "approval_id": e.approval_id, "action": e.tool}
                for e in report.awaiting
            ],
            finished=report.complete,
            values=report.to_dict(),
        )


class CompensationResumer(_ResumerBase):
    """A :class:`tether.approvals.Resumer` for compensation requests: continues compensating.

    ``await decide(saver, thread_id, approval_id, "approve", by=..., args_sha256=...,
    resumer=CompensationResumer(graph))`` stores the decision with every check of
    an approval, then continues the compensation of the thread in this process.
    The sync twin is :class:`SyncCompensationResumer` (for ``decide_sync``).

    Args:
        graph: The graph made with :func:`compensating` that ran the thread.
    """

    async def is_pending(self, request: ApprovalRequest) -> bool:
        """Whether the thread's compensation waits on ``request``."""
        checkpointer = self.graph.checkpointer
        return await run(pending_flow(request.key, request.approval_id), checkpointer)

    async def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        """Continue compensating the run that raised ``request``, with the stored decision."""
        run_id = await compensated_run(self.graph.checkpointer, request)
        report = await compensate(self.graph, self._config(request), run_id=run_id)
        return self._result(request, doc, report)


class SyncCompensationResumer(_ResumerBase):
    """The sync twin of :class:`CompensationResumer`, for the sync deciding functions.

    ``decide_sync(saver, thread_id, approval_id, "approve", by=..., args_sha256=...,
    resumer=SyncCompensationResumer(graph))``, and likewise ``decide_as_sync``,
    ``settle_sync`` and ``expire_due_sync``. Every ``compensate`` hook of the
    graph's tools must then be sync (an async one is refused with a message).

    Args:
        graph: The graph made with :func:`compensating` that ran the thread.
    """

    def is_pending(self, request: ApprovalRequest) -> bool:
        """Whether the thread's compensation waits on ``request``."""
        checkpointer = self.graph.checkpointer
        return run_sync(pending_flow(request.key, request.approval_id), checkpointer)

    def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        """Continue compensating the run that raised ``request``, with the stored decision."""
        run_id = run_sync(run_of(request), self.graph.checkpointer)
        report = compensate_sync(self.graph, self._config(request), run_id=run_id)
        return self._result(request, doc, report)
