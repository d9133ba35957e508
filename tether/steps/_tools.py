"""Durable tools: a tool call inside a graph node is claimed, run once, and recorded.

``durable_tool`` turns a function (or an existing LangChain tool) into a
LangChain ``BaseTool`` for ``ToolNode`` or ``create_react_agent``. Each call is
keyed like a recorded model call (thread, namespace, the node's task id) plus
the model's tool-call id, or the canonical args hash when there is none.

The protocol is claim -> execute -> commit. A committed result is replayed. A
call that was claimed but never committed (the process died in between) is run
again only when that is known to be safe: the tool takes an ``idempotency_key``
(the same key on every retry and worker, so the outside system deduplicates),
or its ``reconcile(args, key)`` hook read the outside world back and found
nothing, or it was declared ``safe_to_retry``. Otherwise tether refuses with
:class:`ToolOutcomeUnknownError`; it never assumes the action did not happen.

An attempt that raised is recorded as failed, and a failed attempt is as
uncertain as a dead one (a timeout often comes after the effect): it is
treated the same way, unless its exception type was declared in
``raises_before_effect``.

The protocol is written once, as a flow (:mod:`._tool_flow`); a tool's
``_run`` and ``_arun`` hand it to the sync or the async interpreter.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import uuid
from collections.abc import Callable
from typing import Any, overload

from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict

from tether._tool_calls import current_tool_call_id, running_tool_call
from tether.steps._compensable import Compensate, CompensationPolicy, check_compensation
from tether.steps._idempotency import (
    KEY_PARAM,
    Reconcile,
    ReconcileResult,
    hide_key,
    idempotency_key,
)
from tether.steps._io import execute, execute_sync, run, run_sync
from tether.steps._scope import node_scope
from tether.steps._tool_flow import execution, tool_flow

__all__ = ["DurableTool", "ReconcileResult", "durable_tool", "idempotency_key"]


class DurableTool(BaseTool):
    """A LangChain tool whose calls inside graph nodes are claimed, run once and recorded.

    Build it with :func:`durable_tool`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool
    reconcile: Any = None
    version: str = ""
    safe_to_retry: bool = False
    raises_before_effect: tuple[type[BaseException], ...] = ()
    compensate: Any = None
    compensation: str = ""
    read_only: bool = False
    takes_key: bool = False
    func: Any = None
    coroutine: Any = None

    # -- entry points: remember the model's tool-call id for the step key -------
    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        with running_tool_call(input):
            return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        with running_tool_call(input):
            return await super().ainvoke(input, config, **kwargs)

    # -- the protocol (tether.steps._tool_flow), run sync or async ---------------
    def _direct(self, args: dict[str, Any]) -> dict[str, Any]:
        # Outside a graph nothing is recorded; a key-taking tool gets a one-off key.
        return {**args, KEY_PARAM: f"tether-adhoc-{uuid.uuid4().hex}"} if self.takes_key else args

    # BaseTool.run/arun put the tool's child config in context; ensure_config() reads it.
    def _run(self, **args: Any) -> Any:
        config = ensure_config()
        scope = node_scope(config)
        if scope is None:
            return execute_sync(execution(self, self._direct(args), config))
        flow = tool_flow(self, scope, args, current_tool_call_id(), config)
        return run_sync(flow, scope.store)

    async def _arun(self, **args: Any) -> Any:
        config = ensure_config()
        scope = node_scope(config)
        if scope is None:
            return await execute(execution(self, self._direct(args), config))
        flow = tool_flow(self, scope, args, current_tool_call_id(), config)
        return await run(flow, scope.store, scope.flight)


# LangChain reads ``_run``/``_arun``'s type hints on every tool call (to find a
# config parameter). Under postponed annotations each read would evaluate the
# strings again; resolved once here, a read costs a dictionary copy.
for _entry in (DurableTool._run, DurableTool._arun):
    _entry.__annotations__ = {"args": Any, "return": Any}


def _is_async(func: Any) -> bool:
    return not isinstance(func, BaseTool) and inspect.iscoroutinefunction(func)


def _as_tool(func_or_tool: Any, name: str | None) -> BaseTool:
    if isinstance(func_or_tool, BaseTool):
        return func_or_tool
    if not callable(func_or_tool):
        raise TypeError(
            f"durable_tool() wraps a function or a LangChain BaseTool, got "
            f"{type(func_or_tool).__name__}"
        )
    if inspect.iscoroutinefunction(func_or_tool):
        return StructuredTool.from_function(coroutine=func_or_tool, name=name)
    return StructuredTool.from_function(func=func_or_tool, name=name)


def _before_effect(declared: Any) -> tuple[type[BaseException], ...]:
    """``raises_before_effect`` checked: a tuple of exception classes."""
    problem = (
        "raises_before_effect must be a tuple of exception classes, e.g. "
        f"raises_before_effect=(ValidationError,), got {declared!r}"
    )
    if not isinstance(declared, tuple | list):
        raise TypeError(problem)
    for item in declared:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(problem)
    return tuple(declared)


def _wrap(
    func_or_tool: Any,
    *,
    name: str | None,
    reconcile: Any,
    version: str | None,
    safe_to_retry: bool,
    raises_before_effect: Any,
    compensate: Any,
    compensation: Any,
    read_only: Any,
) -> DurableTool:
    if isinstance(func_or_tool, DurableTool):
        raise TypeError(f"tool {func_or_tool.name!r} is already durable")
    if reconcile is not None and not callable(reconcile):
        raise TypeError("reconcile must be a callable reconcile(args: dict, key: str)")
    before_effect = _before_effect(raises_before_effect)
    policy = check_compensation(compensate, compensation, read_only)
    inner = _as_tool(func_or_tool, name)
    schema = hide_key(inner.args_schema)
    takes_key = KEY_PARAM in inner.args
    tool = DurableTool(
        name=name or inner.name,
        description=inner.description,
        args_schema=schema,
        return_direct=inner.return_direct,
        inner=inner,
        reconcile=reconcile,
        # A tool that changes nothing outside may run twice without harm.
        safe_to_retry=safe_to_retry or read_only,
        raises_before_effect=before_effect,
        compensate=compensate,
        compensation=policy,
        read_only=read_only,
        takes_key=takes_key,
        func=None
        if isinstance(func_or_tool, BaseTool) or _is_async(func_or_tool)
        else func_or_tool,
        coroutine=func_or_tool if _is_async(func_or_tool) else None,
        version=version or "",
    )
    if not version:
        visible = json.dumps(convert_to_openai_tool(tool), sort_keys=True)
        tool.version = hashlib.sha256(visible.encode()).hexdigest()[:12]
    return tool


@overload
def durable_tool(
    func_or_tool: Callable[..., Any] | BaseTool,
    *,
    name: str | None = None,
    reconcile: Reconcile | None = None,
    version: str | None = None,
    safe_to_retry: bool = False,
    raises_before_effect: tuple[type[BaseException], ...] = (),
    compensate: Compensate | None = None,
    compensation: CompensationPolicy | None = None,
    read_only: bool = False,
) -> DurableTool: ...


@overload
def durable_tool(
    func_or_tool: None = None,
    *,
    name: str | None = None,
    reconcile: Reconcile | None = None,
    version: str | None = None,
    safe_to_retry: bool = False,
    raises_before_effect: tuple[type[BaseException], ...] = (),
    compensate: Compensate | None = None,
    compensation: CompensationPolicy | None = None,
    read_only: bool = False,
) -> Callable[[Callable[..., Any] | BaseTool], DurableTool]: ...


def durable_tool(
    func_or_tool: Callable[..., Any] | BaseTool | None = None,
    *,
    name: str | None = None,
    reconcile: Reconcile | None = None,
    version: str | None = None,
    safe_to_retry: bool = False,
    raises_before_effect: tuple[type[BaseException], ...] = (),
    compensate: Compensate | None = None,
    compensation: CompensationPolicy | None = None,
    read_only: bool = False,
) -> DurableTool | Callable[[Callable[..., Any] | BaseTool], DurableTool]:
    """Make a tool durable: claimed, run once, recorded, replayed.

    Use as ``@durable_tool``, ``@durable_tool(reconcile=...)`` or
    ``durable_tool(existing_langchain_tool)``.

    Args:
        func_or_tool: A function (sync or async; its docstring is the description)
            or a LangChain ``BaseTool``.
        name: The tool's name (default: the function's or tool's name).
        reconcile: ``reconcile(args, key) -> ReconcileResult | None`` for a tool
            that cannot take an ``idempotency_key``: after a crash between claim
            and commit, or after an attempt that raised, it reads the outside
            world back. ``ReconcileResult(output)`` means the action happened
            (the run continues with it); ``None`` means it did not (the tool
            runs); ``ReconcileResult.unknown(reason)`` means it cannot tell (the
            call raises ``ToolOutcomeUnknownError``). Any other value raises
            ``ReconcileResultError``. It may be async.
        version: The tool's schema version, recorded on each step (default: a
            hash of the schema the model sees).
        safe_to_retry: The tool may run twice without harm (e.g. a pure read).
        raises_before_effect: Exception types the tool raises only before it
            has any effect (input validation, a refused connection). An attempt
            that raised one of them (or a subclass) runs again on the next
            attempt; any other exception leaves the outcome unknown, like a
            crash: reconcile, or ``ToolOutcomeUnknownError``.
        compensate: ``compensate(args, result, idempotency_key)`` undoes one
            effect of the tool (sync or async): the call's arguments, its
            recorded result and a key of its own, the same every time this
            effect is compensated. It must be idempotent on that key: after a
            crash mid-compensation it is called again with the same key.
            Compensation runs when a compensating run fails (see
            ``tether.compensation``).
        compensation: This tool's compensation policy: ``"auto"`` (undo it),
            ``"ask"`` (ask a person first) or ``"none"`` (leave it; listed as
            not undone). Default: the run's policy.
        read_only: The tool changes nothing outside (a lookup): there is
            nothing to undo, and it is never listed as "not undone". It is
            also safe to retry: no claim is written before it runs, and a call
            cut short by a crash simply runs again.

    Returns:
        A ``DurableTool`` (a LangChain ``BaseTool``), or a decorator.

    A function that accepts ``idempotency_key`` gets one derived from (tenant,
    thread, step, tool name, args hash): the same on every retry and worker. It
    is hidden from the schema the model sees.
    """
    options: dict[str, Any] = {
        "name": name,
        "reconcile": reconcile,
        "version": version,
        "safe_to_retry": safe_to_retry,
        "raises_before_effect": raises_before_effect,
        "compensate": compensate,
        "compensation": compensation,
        "read_only": read_only,
    }
    if func_or_tool is None:
        return lambda f: _wrap(f, **options)
    return _wrap(func_or_tool, **options)
