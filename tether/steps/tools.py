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
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict

from tether._crashpoints import crash_point
from tether._tool_calls import current_tool_call_id, running_tool_call
from tether.steps.codec import canonical_hash, decode_output, encode_output
from tether.steps.errors import (
    NonDeterminismError,
    ReconcileResultError,
    StepsError,
    ToolOutcomeUnknownError,
)
from tether.steps.idempotency import (
    KEY_PARAM,
    Reconcile,
    ReconcileResult,
    args_digest,
    hide_key,
    idempotency_key,
)
from tether.steps.known import known, remember
from tether.steps.log import step_document
from tether.steps.parent import wait_for_parent_checkpoint
from tether.steps.scope import NodeScope, node_scope, worker_id
from tether.steps.versions import ensure_pins
from tether.store.keyed import KeyedHash

__all__ = ["DurableTool", "ReconcileResult", "durable_tool", "idempotency_key"]

T = TypeVar("T")


@dataclass(frozen=True)
class _Call:
    scope: NodeScope
    key: str
    args: dict[str, Any]
    args_hash: str
    idempotency_key: str


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

    # -- the protocol (one async implementation) ----------------------------------
    def _calls(
        self,
        scope: NodeScope,
        args: dict[str, Any],
        call_id: str | None,
        keyed: KeyedHash | None,
    ) -> tuple[_Call, _Call | None]:
        """The call's keys, and (with encryption on) the plain-hash keys older versions used."""
        args_hash = canonical_hash(args)
        occurrence = None if call_id else scope.calls.occurrence(args_hash)

        def make(k: KeyedHash | None) -> _Call:
            tag = call_id or f"{args_digest(args_hash, k)[:16]}.{occurrence}"
            key = scope.step_key(f"tool.{self.name}.{tag}")
            tenant, thread = scope.tenant, scope.thread_id
            idem = idempotency_key(tenant, thread, key, self.name, args_hash, keyed=k)
            return _Call(scope, key, args, args_hash, idem)

        return make(keyed), None if keyed is None else make(None)

    async def _start(
        self, scope: NodeScope, args: dict[str, Any], call_id: str | None
    ) -> tuple[_Call, str, Any]:
        """The call (under the keys it was first recorded with) and its plan."""
        call, legacy = self._calls(scope, args, call_id, await scope.store.keyed_hash())
        if legacy is not None and await _recorded_by_older_version(call, legacy):
            call = legacy
        action, output = await self._plan(call)
        return call, action, output

    def _claim(self, call: _Call) -> dict[str, Any]:
        return {
            "state": "claimed",
            "tool": self.name,
            "args_hash": call.args_hash,
            "idempotency_key": call.idempotency_key,
            "claimed_at": time.time(),
            "attempt": call.scope.attempt,
            "worker_id": worker_id(),
        }

    async def _plan(self, call: _Call) -> tuple[str, Any]:
        """``("replay", output)``, ``("run", None)`` or ``("reconcile", reclaim)``.

        ``reclaim`` says the stored record is a failed attempt, to be replaced by
        a fresh claim if the hook finds nothing and the tool runs again.
        """
        scope, store = call.scope, call.scope.store
        await ensure_pins(scope)
        await wait_for_parent_checkpoint(scope)
        if self.takes_key or self.safe_to_retry:
            # Running again is safe, so no intent needs claiming: at most one read.
            record = None
            if await known(store, scope.thread_id, "tool", call.key):
                record = await store.get("tool", call.key)
            if record is None:
                return "run", None
        else:
            claim = self._claim(call)
            inserted = await store.insert("tool", call.key, claim, thread_id=scope.thread_id)
            remember(store, scope.thread_id, "tool", call.key)
            if inserted:
                return "run", None
            record = await store.get("tool", call.key)
            if record is None:  # deleted in between (the thread was deleted)
                return "run", None
        return await self._resolve(call, record.value)

    async def _resolve(self, call: _Call, value: dict[str, Any]) -> tuple[str, Any]:
        """What to do about a call that already has a record (see :meth:`_plan`)."""
        if value["args_hash"] != call.args_hash:
            raise NonDeterminismError(call.key, value["args_hash"], call.args_hash, "tool call")
        if value["state"] == "done":
            return "replay", decode_output(value["output"])
        if self.takes_key or self.safe_to_retry:
            return "run", None
        failed = value["state"] == "failed"
        # A failed attempt is as uncertain as a claim whose process died (a timeout
        # may come after the effect), unless its exception type was declared as
        # raised before any effect. Records from before that flag existed lack it
        # and so count as uncertain.
        if failed and value.get("before_effect") is True:
            await self._reclaim(call)
            return "run", None
        if self.reconcile is not None:
            return "reconcile", failed
        raise ToolOutcomeUnknownError(
            self.name, call.key, error=str(value.get("error", "an exception")) if failed else None
        )

    async def _reclaim(self, call: _Call) -> None:
        """Replace a failed attempt by a fresh claim before running the tool again.

        Without it a second attempt that dies after its effect would still read
        as the first attempt's "failed before any effect", and run a third time.
        """
        scope = call.scope
        await scope.store.upsert("tool", call.key, self._claim(call), thread_id=scope.thread_id)

    def _reconciled(self, call: _Call, found: Any) -> ReconcileResult | None:
        """The hook's answer, checked: a result that happened, or ``None`` (it did not)."""
        if found is None:
            return None
        if not isinstance(found, ReconcileResult):
            raise ReconcileResultError(self.name, call.key, found)
        if found.outcome == "unknown":
            raise ToolOutcomeUnknownError(self.name, call.key, reason=found.reason)
        return found

    async def _commit(self, call: _Call, output: Any, started: float, how: str) -> None:
        scope = call.scope
        try:
            encoded = encode_output(output)
        except StepsError:  # e.g. an object the tool returned; the model sees its text anyway
            encoded = encode_output(str(output))
        value = {
            "state": "done",
            "tool": self.name,
            "args_hash": call.args_hash,
            "idempotency_key": call.idempotency_key,
            "output": encoded,
            "how": how,
            "node": scope.node,
            "task_id": scope.task_id,
            "attempt": scope.attempt,
            "version": self.version,
            "started_at": started,
            "ended_at": time.time(),
        }
        remember(scope.store, scope.thread_id, "tool", call.key)
        await scope.store.put_with_step(
            "tool",
            call.key,
            value,
            thread_id=scope.thread_id,
            step=self._step(call.key, value),
            replace=True,
        )

    async def _fail(self, call: _Call, error: BaseException) -> None:
        value = {
            "state": "failed",
            "tool": self.name,
            "args_hash": call.args_hash,
            "idempotency_key": call.idempotency_key,
            "error": repr(error)[:2000],
            "error_type": f"{type(error).__module__}.{type(error).__qualname__}",
            "before_effect": isinstance(error, self.raises_before_effect),
        }
        remember(call.scope.store, call.scope.thread_id, "tool", call.key)
        await call.scope.store.upsert("tool", call.key, value, thread_id=call.scope.thread_id)

    def _step(self, key: str, value: dict[str, Any]) -> dict[str, Any]:
        return step_document(
            "tool",
            name=self.name,
            node=value.get("node", ""),
            task_id=value.get("task_id", ""),
            input_hash=value["args_hash"],
            output_ref=("tool", key),
            tool_schema_version=self.version,
            started_at=value.get("started_at"),
            ended_at=value.get("ended_at"),
            attempt=value.get("attempt", 1),
            key=key,
            detail={"how": value.get("how", "run")},
        )

    def _inputs(self, call: _Call) -> dict[str, Any]:
        return {**call.args, KEY_PARAM: call.idempotency_key} if self.takes_key else call.args

    def _direct(self, args: dict[str, Any]) -> dict[str, Any]:
        # Outside a graph nothing is recorded; a key-taking tool gets a one-off key.
        return {**args, KEY_PARAM: f"tether-adhoc-{uuid.uuid4().hex}"} if self.takes_key else args

    # -- sync -----------------------------------------------------------------------
    def _execute(self, inputs: dict[str, Any], config: RunnableConfig) -> Any:
        if self.func is not None:  # a plain function: no second tool run around it
            return self.func(**inputs)
        return self.inner.invoke(inputs, config)

    async def _aexecute(self, inputs: dict[str, Any], config: RunnableConfig) -> Any:
        if self.coroutine is not None:
            return await self.coroutine(**inputs)
        if self.func is not None:
            return await run_in_executor(config, self.func, **inputs)
        return await self.inner.ainvoke(inputs, config)

    # BaseTool.run/arun put the tool's child config in context; ensure_config() reads it.
    def _run(self, **args: Any) -> Any:
        config = ensure_config()
        scope = node_scope(config)
        if scope is None:
            return self._execute(self._direct(args), config)

        def run(coro: Coroutine[Any, Any, T]) -> T:
            return scope.store._run_sync(coro, "tool step")

        call, action, output = run(self._start(scope, args, current_tool_call_id()))
        if action == "replay":
            return output
        if action == "reconcile":
            found = self.reconcile(dict(call.args), call.idempotency_key)
            if inspect.isawaitable(found):
                if inspect.iscoroutine(found):
                    found.close()  # never run: a sync node cannot await it
                raise StepsError(
                    f"tool {self.name!r} has an async reconcile hook; call it "
                    "with ainvoke (async graphs) or make the hook sync"
                )
            result = self._reconciled(call, found)
            if result is not None:
                run(self._commit(call, result.output, time.time(), "reconciled"))
                return result.output
            if output:  # the hook found nothing: the failed attempt did nothing
                run(self._reclaim(call))
        crash_point("tool.before")
        started = time.time()
        try:
            output = self._execute(self._inputs(call), config)
        except Exception as exc:
            run(self._fail(call, exc))
            raise
        run(self._commit(call, output, started, "run"))
        crash_point("tool.after")
        return output

    # -- async ----------------------------------------------------------------------
    async def _arun(self, **args: Any) -> Any:
        config = ensure_config()
        scope = node_scope(config)
        if scope is None:
            return await self._aexecute(self._direct(args), config)
        call, action, output = await self._start(scope, args, current_tool_call_id())
        if action == "replay":
            return output
        if action == "reconcile":
            found = self.reconcile(dict(call.args), call.idempotency_key)
            if inspect.isawaitable(found):
                found = await found
            result = self._reconciled(call, found)
            if result is not None:
                await self._commit(call, result.output, time.time(), "reconciled")
                return result.output
            if output:  # the hook found nothing: the failed attempt did nothing
                await self._reclaim(call)
        crash_point("tool.before")
        started = time.time()
        try:
            output = await self._aexecute(self._inputs(call), config)
        except Exception as exc:
            await self._fail(call, exc)
            raise
        await self._commit(call, output, started, "run")
        crash_point("tool.after")
        return output


async def _recorded_by_older_version(call: _Call, legacy: _Call) -> bool:
    """Whether this call was recorded under the plain-hash keys of an older version.

    Such a run keeps its keys (and so its idempotency key) to the end.
    """
    store, thread_id = call.scope.store, call.scope.thread_id
    if not await known(store, thread_id, "tool", legacy.key):
        return False
    if legacy.key != call.key:
        return True
    record = await store.get("tool", legacy.key)  # same key (a tool-call id): which scheme?
    return record is not None and record.value.get("idempotency_key") == legacy.idempotency_key


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
) -> DurableTool:
    if isinstance(func_or_tool, DurableTool):
        raise TypeError(f"tool {func_or_tool.name!r} is already durable")
    if reconcile is not None and not callable(reconcile):
        raise TypeError("reconcile must be a callable reconcile(args: dict, key: str)")
    before_effect = _before_effect(raises_before_effect)
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
        safe_to_retry=safe_to_retry,
        raises_before_effect=before_effect,
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
) -> Callable[[Callable[..., Any] | BaseTool], DurableTool]: ...


def durable_tool(
    func_or_tool: Callable[..., Any] | BaseTool | None = None,
    *,
    name: str | None = None,
    reconcile: Reconcile | None = None,
    version: str | None = None,
    safe_to_retry: bool = False,
    raises_before_effect: tuple[type[BaseException], ...] = (),
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
    }
    if func_or_tool is None:
        return lambda f: _wrap(f, **options)
    return _wrap(func_or_tool, **options)
