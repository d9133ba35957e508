"""The recording core shared by every recorded model.

A :class:`Recorder` holds what is written on each step (the model id, the
prompt version, the price) and runs one call of a wrapped Runnable as a
recorded step: inside a graph node that has a checkpointer it looks for a
record of the call (thread, checkpoint namespace, the node's task id, the
call's index within this execution of the node), replays it if found (a
different input hash raises :class:`NonDeterminismError`), and otherwise calls
the model and writes the answer durably before returning it. Outside a graph it
simply calls the model. :class:`~tether.steps._runnable.RecordedModel` and
:class:`~tether.steps._chat.RecordedChatModel` are thin shells around it.

The protocol is one flow (:mod:`._io`) that ``invoke``, ``ainvoke``,
``stream`` and ``astream`` hand to the sync or the async interpreter.

Streaming inside a graph yields exactly what is recorded. Two workers can
record the same call (a lease that expired under a live worker, a run resumed
twice): both call the model, the first commit wins, and the other worker's
answer is dropped in favour of the winner's, which is what every replay
returns. So ``stream``/``astream`` hold the live chunks until the commit
says whose answer stands: this process's chunks are then yielded as they
came, and another worker's answer is yielded as chunks instead. The cost is
that the caller gets its first chunk only once the whole answer is recorded;
the wrapped model's own callbacks still see every token as it arrives, so
LangGraph's ``stream_mode="messages"`` keeps streaming tokens live.
"""

from __future__ import annotations

import operator
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from functools import partial, reduce
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel

from tether.boundaries import boundary, note
from tether.steps import _budget as budgets
from tether.steps._chunks import as_chunks, assemble
from tether.steps._codec import canonical_hash, decode_output, encode_output
from tether.steps._errors import NonDeterminismError, NotRecordedError
from tether.steps._io import IN_FLIGHT, Await, Commit, Flow, Invoke, Pause, Stream, run, run_sync
from tether.steps._known import known_flow, remember
from tether.steps._log import step_document
from tether.steps._parent import wait_for_parent_checkpoint
from tether.steps._scope import NodeScope, node_scope, worker_id
from tether.steps._versions import VersionPins, ensure_pins_flow
from tether.store import operations as ops

__all__ = ["Recorder", "default_model_id", "model_step", "structured_schema"]


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

    # -- the protocol, written once (run by the interpreters of ._io) ------------
    def _call(self, scope: NodeScope, model_input: Any) -> _Call:
        index = scope.calls.next_index()
        return _Call(scope, index, scope.step_key(f"model.{index}"), canonical_hash(model_input))

    def _flow(self, scope: NodeScope, ask: Invoke | Stream) -> Flow[Any]:
        """One recorded call: the answer (``Invoke``), or the chunks to yield (``Stream``).

        A stream's chunks are held until the answer is recorded: if another
        worker recorded this call first, its answer is the run's answer, and
        the caller must see that one, not chunks of an answer that was dropped.
        """
        call = self._call(scope, ask.input)
        plan = yield from self._plan(call)
        if plan.replayed:
            note("model.replayed", {"key": call.key, "node": scope.node, "task_id": scope.task_id})
            return list(as_chunks(plan.replay)) if isinstance(ask, Stream) else plan.replay
        yield from self._over_budget(call, plan)
        boundary("model.before")
        started = time.time()
        if isinstance(ask, Stream):
            chunks: list[Any] = yield ask
            output = assemble(reduce(operator.add, chunks)) if chunks else None
        else:
            output = yield ask
        # A stream's chunks wait for the commit's verdict, so only invoke may leave it in flight.
        won, answer, detail = yield from self._commit(
            call, output, started, plan, deferrable=isinstance(ask, Invoke)
        )
        if detail is not None:  # else the write passes the boundary when it lands
            boundary("model.after", detail)
        if isinstance(ask, Invoke):
            return answer
        return chunks if won else list(as_chunks(answer))

    def _plan(self, call: _Call) -> Flow[_Plan]:
        scope = call.scope
        # No pins or budget: nothing to check or charge, so no call (a hop in sync code).
        pins = (yield from ensure_pins_flow(scope)) if scope.pinned else None
        record = None
        if (yield from known_flow(scope.store, scope.thread_id, "model", call.key)):
            record = yield ops.Get("model", call.key)
        if record is not None:
            recorded_hash = record.value["input_hash"]
            if recorded_hash != call.input_hash:
                raise NonDeterminismError(call.key, recorded_hash, call.input_hash, "model call")
            return _Plan(decode_output(record.value["output"], self.schema), True, pins)
        if scope.replay_only:
            raise NotRecordedError(call.key, "model call")
        yield from wait_for_parent_checkpoint(scope)
        ledger = (yield Await(partial(budgets.ledger_for, scope))) if scope.budgeted else None
        return _Plan(pins=pins, ledger=ledger)

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

    def _commit(
        self, call: _Call, output: Any, started: float, plan: _Plan, *, deferrable: bool
    ) -> Flow[tuple[bool, Any, dict[str, Any] | None]]:
        """Record ``output``: ``(True, output, detail)``, or ``(False, answer, detail)`` if
        another worker won; ``detail`` is what the run's event says about the step,
        ``None`` if the write was left in flight (a budget's charge never is)."""
        scope = call.scope
        doc = self._document(call, output, started, plan)
        put = ops.PutWithStep("model", call.key, doc, scope.thread_id, model_step(call.key, doc))
        defer = deferrable and plan.ledger is None and scope.defers_records
        detail = _step_detail(call, doc)
        index = yield Commit(put, "model.after", detail, scope.flight, defer)
        remember(scope.store, scope.thread_id, "model", call.key)
        if index == IN_FLIGHT:
            return True, output, None
        detail = {**detail, "step_index": index}
        if index is None:
            # Another worker recorded this step first: its answer is the run's answer.
            winner = yield ops.Get("model", call.key)
            if winner is not None:
                return False, decode_output(winner.value["output"], self.schema), detail
        if plan.ledger is not None:
            tokens, cost = doc["usage"].get("total_tokens", 0), doc["cost_usd"]
            yield Await(partial(budgets.charge, scope, plan.ledger, call.key, tokens, cost))
        return True, output, detail

    @staticmethod
    def _over_budget(call: _Call, plan: _Plan) -> Flow[None]:
        """Stop, or pause (interrupt) until a person extends the budget."""
        ledger, problem, rounds = plan.ledger, None, 0
        while ledger is not None and ledger.exceeded():
            key = f"{call.key}|{rounds}"
            if problem is None:
                yield Await(partial(budgets.record_exceeded, call.scope, ledger, key))
            ask = partial(budgets.ask_for_more, call.scope, ledger, problem)
            limits, problem = yield Pause(ask)
            if limits is not None:
                yield Await(partial(budgets.extend, call.scope, ledger, limits, key))
                rounds += 1

    # -- entry points: the same flow, run sync or async -------------------------
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
        return run_sync(self._flow(scope, Invoke(model, input, config, kwargs)), scope.store)

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
        flow = self._flow(scope, Invoke(model, input, config, kwargs))
        return await run(flow, scope.store, scope.flight)

    def stream(
        self,
        model: Runnable[Any, Any],
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Stream ``model``'s answer once it is recorded; a recorded answer comes back as chunks."""
        scope = node_scope(config)
        if scope is None:
            yield from model.stream(input, config, **kwargs)
            return
        yield from run_sync(self._flow(scope, Stream(model, input, config, kwargs)), scope.store)

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
        flow = self._flow(scope, Stream(model, input, config, kwargs))
        for chunk in await run(flow, scope.store, scope.flight):
            yield chunk


def _step_detail(call: _Call, doc: dict[str, Any]) -> dict[str, Any]:
    """What a run's ``model.step`` event says (with the ``step_index`` the write
    answers): where and which step, never its content."""
    return {
        "key": call.key,
        "model_id": doc["model_id"],
        "usage": doc["usage"],
        "node": doc["node"],
        "task_id": doc["task_id"],
    }


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
