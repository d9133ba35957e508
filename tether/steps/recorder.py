"""The recording core shared by every recorded model.

A :class:`Recorder` holds what is written on each step (the model id, the
prompt version, the price) and runs one call of a wrapped Runnable as a
recorded step: inside a graph node that has a checkpointer it looks for a
record of the call (thread, checkpoint namespace, the node's task id, the
call's index within this execution of the node), replays it if found (a
different input hash raises :class:`NonDeterminismError`), and otherwise calls
the model and writes the answer durably before returning it. Outside a graph it
simply calls the model. :class:`~tether.steps.runnable.RecordedModel` and
:class:`~tether.steps.chat.RecordedChatModel` are thin shells around it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel

from tether._crashpoints import crash_point
from tether.steps import budget as budgets
from tether.steps.chunks import as_chunks, assemble
from tether.steps.codec import canonical_hash, decode_output, encode_output
from tether.steps.errors import NonDeterminismError
from tether.steps.known import known, remember
from tether.steps.log import step_document
from tether.steps.parent import wait_for_parent_checkpoint
from tether.steps.scope import NodeScope, node_scope, worker_id
from tether.steps.versions import VersionPins, ensure_pins

__all__ = ["Recorder", "default_model_id", "model_step", "structured_schema"]

T = TypeVar("T")


@dataclass(frozen=True)
class _Call:
    scope: NodeScope
    index: int
    key: str
    input_hash: str


@dataclass
class _Plan:
    """What to do with a call: replay ``output``, or call the model."""

    replay: Any = None
    replayed: bool = False
    pins: VersionPins | None = None
    ledger: budgets.Ledger | None = None


def _usage(output: Any) -> dict[str, int]:
    meta = getattr(output, "usage_metadata", None) or {}
    return {k: int(meta[k]) for k in ("input_tokens", "output_tokens", "total_tokens") if k in meta}


def default_model_id(model: Runnable[Any, Any]) -> str:
    """The id recorded for ``model`` when none is given: its own name, else its class."""
    inner: Any = getattr(model, "bound", model)
    for attr in ("model_name", "model", "model_id"):
        value = getattr(inner, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(inner).__name__


def structured_schema(schema: Any) -> type[BaseModel] | None:
    """The pydantic class a structured output is rebuilt with, if ``schema`` is one."""
    return schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None


@dataclass(frozen=True)
class Recorder:
    """Records and replays the calls of a model.

    Attributes:
        model_id: The id recorded on each step.
        prompt_version: Your prompt's version label, recorded on each step.
        price: What the model charges, for cost accounting and budgets.
        schema: The pydantic class structured outputs are rebuilt with.
    """

    model_id: str
    prompt_version: str | None = None
    price: budgets.Price | None = None
    schema: type[BaseModel] | None = None

    def for_schema(self, schema: Any) -> Recorder:
        """This recorder, rebuilding replayed outputs as ``schema`` (if pydantic)."""
        return replace(self, schema=structured_schema(schema))

    # -- planning and committing (one async implementation) ------------------
    def _call(self, scope: NodeScope, model_input: Any) -> _Call:
        index = scope.calls.next_index()
        return _Call(scope, index, scope.step_key(f"model.{index}"), canonical_hash(model_input))

    async def _plan(self, call: _Call) -> _Plan:
        scope = call.scope
        pins = await ensure_pins(scope)
        record = None
        if await known(scope.store, scope.thread_id, "model", call.key):
            record = await scope.store.get("model", call.key)
        if record is not None:
            recorded_hash = record.value["input_hash"]
            if recorded_hash != call.input_hash:
                raise NonDeterminismError(call.key, recorded_hash, call.input_hash, "model call")
            return _Plan(decode_output(record.value["output"], self.schema), True, pins)
        await wait_for_parent_checkpoint(scope)
        return _Plan(pins=pins, ledger=await budgets.ledger_for(scope))

    def _document(self, call: _Call, output: Any, started: float, plan: _Plan) -> dict[str, Any]:
        usage = _usage(output)
        scope = call.scope
        return {
            "input_hash": call.input_hash,
            "output": encode_output(output),
            "usage": usage,
            "cost_usd": self.price.cost(usage) if self.price else 0.0,
            "model_id": self.model_id,
            "prompt_version": self.prompt_version
            or (plan.pins.prompt_version if plan.pins else None),
            "graph_version": plan.pins.graph if plan.pins else None,
            "node": scope.node,
            "task_id": scope.task_id,
            "attempt": scope.attempt,
            "started_at": started,
            "ended_at": time.time(),
            "worker_id": worker_id(),
        }

    async def _commit(self, call: _Call, output: Any, started: float, plan: _Plan) -> Any:
        scope = call.scope
        doc = self._document(call, output, started, plan)
        index = await scope.store.put_with_step(
            "model", call.key, doc, thread_id=scope.thread_id, step=model_step(call.key, doc)
        )
        remember(scope.store, scope.thread_id, "model", call.key)
        if index is None:
            # Another worker recorded this step first: its answer is the run's answer.
            winner = await scope.store.get("model", call.key)
            if winner is not None:
                return decode_output(winner.value["output"], self.schema)
        if plan.ledger is not None:
            tokens = doc["usage"].get("total_tokens", 0)
            await budgets.charge(scope, plan.ledger, call.key, tokens, doc["cost_usd"])
        return output

    # -- budget (interrupt() must run in the node's own context) --------------
    @staticmethod
    def _budget_writes(call: _Call, plan: _Plan) -> Iterator[Coroutine[Any, Any, None]]:
        """Stop, or pause (interrupt) until a person extends the budget.

        Yields the storage writes in order; the caller runs each before asking
        for the next, so ``ask_for_more`` (and its ``interrupt``) runs in the
        caller's own context, sync or async.
        """
        ledger, problem, rounds = plan.ledger, None, 0
        while ledger is not None and ledger.exceeded():
            key = f"{call.key}|{rounds}"
            if problem is None:
                yield budgets.record_exceeded(call.scope, ledger, key)
            limits, problem = budgets.ask_for_more(call.scope, ledger, problem)
            if limits is not None:
                yield budgets.extend(call.scope, ledger, limits, key)
                rounds += 1

    def _over_budget(
        self, call: _Call, plan: _Plan, run: Callable[[Coroutine[Any, Any, Any]], Any]
    ) -> None:
        for write in self._budget_writes(call, plan):
            run(write)

    async def _aover_budget(self, call: _Call, plan: _Plan) -> None:
        for write in self._budget_writes(call, plan):
            await write

    # -- sync ------------------------------------------------------------------
    @staticmethod
    def _sync(call: _Call) -> Callable[[Coroutine[Any, Any, T]], T]:
        store = call.scope.store
        return lambda coro: store._run_sync(coro, "model step")

    def invoke(
        self,
        model: Runnable[Any, Any],
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        """Call ``model``, or return the recorded answer for this step."""
        scope = node_scope(config)
        if scope is None:
            return model.invoke(input, config, **kwargs)
        call = self._call(scope, input)
        run = self._sync(call)
        plan = run(self._plan(call))
        if plan.replayed:
            return plan.replay
        self._over_budget(call, plan, run)
        crash_point("model.before")
        started = time.time()
        output = model.invoke(input, config, **kwargs)
        output = run(self._commit(call, output, started, plan))
        crash_point("model.after")
        return output

    def stream(
        self,
        model: Runnable[Any, Any],
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Stream ``model``'s answer; a recorded answer comes back as chunks."""
        scope = node_scope(config)
        if scope is None:
            yield from model.stream(input, config, **kwargs)
            return
        call = self._call(scope, input)
        run = self._sync(call)
        plan = run(self._plan(call))
        if plan.replayed:
            yield from as_chunks(plan.replay)
            return
        self._over_budget(call, plan, run)
        crash_point("model.before")
        started = time.time()
        held: Any = None
        total: Any = None
        for chunk in model.stream(input, config, **kwargs):
            if held is not None:
                yield held
            held = chunk
            total = chunk if total is None else total + chunk
        # The last chunk is held back until the whole answer is recorded.
        run(self._commit(call, assemble(total), started, plan))
        crash_point("model.after")
        if held is not None:
            yield held

    # -- async -------------------------------------------------------------------
    async def ainvoke(
        self,
        model: Runnable[Any, Any],
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        """Async :meth:`invoke`."""
        scope = node_scope(config)
        if scope is None:
            return await model.ainvoke(input, config, **kwargs)
        call = self._call(scope, input)
        plan = await self._plan(call)
        if plan.replayed:
            return plan.replay
        await self._aover_budget(call, plan)
        crash_point("model.before")
        started = time.time()
        output = await model.ainvoke(input, config, **kwargs)
        output = await self._commit(call, output, started, plan)
        crash_point("model.after")
        return output

    async def astream(
        self,
        model: Runnable[Any, Any],
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """Async :meth:`stream`."""
        scope = node_scope(config)
        if scope is None:
            async for chunk in model.astream(input, config, **kwargs):
                yield chunk
            return
        call = self._call(scope, input)
        plan = await self._plan(call)
        if plan.replayed:
            for chunk in as_chunks(plan.replay):
                yield chunk
            return
        await self._aover_budget(call, plan)
        crash_point("model.before")
        started = time.time()
        held: Any = None
        total: Any = None
        async for chunk in model.astream(input, config, **kwargs):
            if held is not None:
                yield held
            held = chunk
            total = chunk if total is None else total + chunk
        await self._commit(call, assemble(total), started, plan)
        crash_point("model.after")
        if held is not None:
            yield held


def model_step(key: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The step-log entry of a recorded model call (its output stays in the record)."""
    return step_document(
        "model",
        name=doc["model_id"],
        node=doc["node"],
        task_id=doc["task_id"],
        input_hash=doc["input_hash"],
        output_ref=("model", key),
        model_id=doc["model_id"],
        prompt_version=doc["prompt_version"],
        usage=doc["usage"],
        cost_usd=doc["cost_usd"],
        started_at=doc["started_at"],
        ended_at=doc["ended_at"],
        attempt=doc["attempt"],
        key=key,
        graph_version=doc["graph_version"],
    )
