"""The step log: for a thread, the ordered record of every step, readable mid-run.

Steps are appended by recorded models, durable tools, budgets, version pins
and approvals. There is no API that edits or removes one (deleting the whole
thread aside), and tools get no handle on the log.

Model and tool steps do not copy their output: they point at the record that
holds it (``output_ref``), and :func:`read_steps` joins the two, so each output
is stored once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.steps._codec import decode_output, encode_output
from tether.steps._errors import StepsError
from tether.steps._io import Flow, run, run_sync
from tether.steps._scope import worker_id
from tether.store import Record, store_for
from tether.store import operations as ops

__all__ = ["Step", "StepKind", "append_step", "read_steps", "read_steps_sync"]

StepKind = Literal["model", "tool", "approval", "version-change", "budget", "compensation"]
_KINDS = ("model", "tool", "approval", "version-change", "budget", "compensation")


@dataclass(frozen=True)
class Step:
    """One entry of a thread's step log.

    Attributes:
        index: 0-based position in the log.
        kind: ``model``, ``tool``, ``approval``, ``version-change``, ``budget`` or
            ``compensation`` (an effect undone, or not; ``detail["undoes"]`` is
            the index of the tool step it answers).
        node: The graph node the step ran in.
        task_id: LangGraph's id of the node execution.
        name: Model id, tool name, or what the step is about.
        input_hash: SHA-256 of the canonical input.
        output: The result (decrypted when encryption is on).
        model_id: The model's id, for model steps and pins.
        prompt_version: The prompt version the run is pinned to.
        tool_schema_version: The tool's schema version, for tool steps.
        usage: Token usage (``input_tokens``, ``output_tokens``, ``total_tokens``).
        cost_usd: What the step cost.
        started_at: Unix time the step began.
        ended_at: Unix time the step ended.
        duration_ms: ``ended_at - started_at`` in milliseconds.
        attempt: The node attempt (1 on the first run; higher on retries).
        worker_id: ``hostname:pid`` of the process that ran it.
        key: The record key of the step's result, if it has one.
        graph_version: The graph fingerprint the step ran under, if pinned.
        detail: Kind-specific extras (changes, limits, decisions).
    """

    index: int
    kind: StepKind
    node: str
    task_id: str
    name: str
    input_hash: str
    output: Any
    model_id: str | None
    prompt_version: str | None
    tool_schema_version: str | None
    usage: dict[str, int]
    cost_usd: float
    started_at: float
    ended_at: float
    duration_ms: float
    attempt: int
    worker_id: str
    key: str | None = None
    graph_version: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The step as JSON (its output encoded as the record holds it), for the wire."""
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        try:
            doc["output"] = encode_output(self.output)
        except StepsError:  # an object only its repr can show
            doc["output"] = encode_output(repr(self.output))
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Step:
        """The inverse of :meth:`to_json`: messages and pydantic models rebuilt."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in doc.items() if k in names}
        values["output"] = _output(doc.get("output"))
        return cls(**values)


def step_document(
    kind: StepKind,
    *,
    name: str,
    node: str = "",
    task_id: str = "",
    input_hash: str = "",
    output: Any = None,
    output_ref: tuple[str, str] | None = None,
    model_id: str | None = None,
    prompt_version: str | None = None,
    tool_schema_version: str | None = None,
    usage: dict[str, int] | None = None,
    cost_usd: float = 0.0,
    started_at: float | None = None,
    ended_at: float | None = None,
    attempt: int = 1,
    key: str | None = None,
    graph_version: str | None = None,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The stored form of a step (everything but its index)."""
    if kind not in _KINDS:
        raise ValueError(f"step kind {kind!r} is not one of {', '.join(_KINDS)}")
    end = time.time() if ended_at is None else ended_at
    start = end if started_at is None else started_at
    doc: dict[str, Any] = {
        "kind": kind,
        "node": node,
        "task_id": task_id,
        "name": name,
        "input_hash": input_hash,
        "model_id": model_id,
        "prompt_version": prompt_version,
        "tool_schema_version": tool_schema_version,
        "usage": usage or {},
        "cost_usd": cost_usd,
        "started_at": start,
        "ended_at": end,
        "attempt": attempt,
        "worker_id": worker_id(),
        "key": key,
        "graph_version": graph_version,
        "detail": detail or {},
    }
    if output_ref is not None:
        doc["output_ref"] = list(output_ref)
    else:
        doc["output"] = output
    return doc


def scope_step(scope: Any, kind: StepKind, name: str, **fields: Any) -> dict[str, Any]:
    """A step document stamped with the running node execution (``NodeScope``)."""
    return step_document(
        kind, name=name, node=scope.node, task_id=scope.task_id, attempt=scope.attempt, **fields
    )


async def append_step(
    checkpointer: BaseCheckpointSaver[Any], thread_id: str, kind: StepKind, **fields: Any
) -> int:
    """Append a step to a thread's log (for tether's own packages, e.g. approval audits).

    Args:
        checkpointer: The run's checkpointer.
        thread_id: The thread.
        kind: The step kind (approvals use ``"approval"``).
        **fields: Keyword fields of :class:`Step` (``name`` is required; ``output``
            must be JSON).

    Returns:
        The new step's index.
    """
    return await store_for(checkpointer).append_step(thread_id, step_document(kind, **fields))


def _output(doc: Any) -> Any:
    if not isinstance(doc, dict):
        return doc
    try:
        return decode_output(doc)
    except StepsError:  # a class that cannot be imported here: show the stored form
        return doc


def _step(index: int, doc: dict[str, Any], outputs: dict[tuple[str, str], Any]) -> Step:
    ref = doc.get("output_ref")
    output = outputs.get((ref[0], ref[1])) if ref else doc.get("output")
    # Lenient: other packages write steps in this shape without the steps layer.
    start = float(doc.get("started_at") or 0.0)
    end = float(doc.get("ended_at") or start)
    return Step(
        index=index,
        kind=doc.get("kind", "approval"),
        node=str(doc.get("node") or ""),
        task_id=str(doc.get("task_id") or ""),
        name=str(doc.get("name") or ""),
        input_hash=str(doc.get("input_hash") or ""),
        output=output,
        model_id=doc.get("model_id"),
        prompt_version=doc.get("prompt_version"),
        tool_schema_version=doc.get("tool_schema_version"),
        usage=doc.get("usage") or {},
        cost_usd=float(doc.get("cost_usd") or 0.0),
        started_at=start,
        ended_at=end,
        duration_ms=round((end - start) * 1000, 3),
        attempt=int(doc.get("attempt", 1)),
        worker_id=doc.get("worker_id", ""),
        key=doc.get("key"),
        graph_version=doc.get("graph_version"),
        detail=doc.get("detail") or {},
    )


def _read(thread_id: str) -> Flow[list[Step]]:
    """The thread's steps, each joined with the output its record holds."""
    docs: list[tuple[int, dict[str, Any]]] = yield ops.IndexedSteps(thread_id)
    kinds = sorted({d["output_ref"][0] for _, d in docs if d.get("output_ref")})
    outputs: dict[tuple[str, str], Any] = {}
    for kind in kinds:
        records: list[Record] = yield ops.List(kind, thread_id)
        for record in records:
            outputs[(kind, record.key)] = _output(record.value.get("output"))
    return [_step(i, doc, outputs) for i, doc in docs]


async def read_steps(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> list[Step]:
    """The thread's step log, oldest first; works while the run is in flight.

    Args:
        checkpointer: The checkpointer the run uses (any backend, encrypted or not).
        thread_id: The thread.
    """
    return await run(_read(str(thread_id)), store_for(checkpointer))


def read_steps_sync(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> list[Step]:
    """Sync twin of :func:`read_steps` (not from the checkpointer's own event loop)."""
    return run_sync(_read(str(thread_id)), store_for(checkpointer))
