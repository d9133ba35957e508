"""The control plane's rules, shared by both backends: checks, messages and event bodies.

Each backend runs its own SQL; what is decided, refused and recorded is
decided here, once, so PostgreSQL and SQLite behave the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast, get_args

from tether.runtime.errors import AlreadyExistsError, InvalidRunRequestError, RunNotActiveError
from tether.runtime.ids import check_id, new_id, system_assistant_id
from tether.runtime.models import Assistant, CancelAction, IfExists, Run, RunStatus
from tether.runtime.store.encoding import dumps, dumps_display, loads
from tether.runtime.store.sealing import Sealer
from tether.runtime.store.types import KEEP, Hold, NewEvent, Outcome
from tether.runtime.store.validation import (
    COMMAND_KEYS,
    ValidRun,
    check_assistant_config,
    check_mapping,
    check_run_config,
    encode,
)

__all__ = [
    "MISSING_SCHEMA",
    "RESUMED_KEY",
    "NewAssistant",
    "attempts_exceeded",
    "cancel_event",
    "check_action",
    "check_cancellable",
    "check_if_exists",
    "check_not_a_graph_name",
    "check_page",
    "continued_event",
    "continued_reason",
    "created_event",
    "existing_assistant",
    "existing_thread",
    "finish_params",
    "finished_data",
    "is_system_assistant",
    "mirrored",
    "new_assistant",
    "no_assistant",
    "no_run",
    "no_thread",
    "not_interrupted",
    "resume_input",
    "resumed_event",
    "run_params",
    "thread_marks",
    "visible_assistant",
    "where",
    "with_assistant",
]


MISSING_SCHEMA = (
    "the run store's tables are missing: call setup() on the store (or run "
    "`tether runtime setup --url URL`) once before using it"
)


def no_run(run_id: str) -> str:
    return f"no run {run_id!r} for this tenant"


def no_thread(thread_id: str) -> str:
    return f"no thread {thread_id!r} for this tenant"


def no_assistant(assistant_id: str) -> str:
    return (
        f"no assistant {assistant_id!r} for this tenant, and no graph with that id has a "
        "system assistant"
    )


def check_page(limit: object, offset: object, *, offset_name: str = "offset") -> None:
    """``limit`` >= 1 and ``offset`` >= 0, as integers."""
    for value, name, least in ((limit, "limit", 1), (offset, offset_name, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise InvalidRunRequestError(f"{name} must be an integer >= {least}, got {value!r}")


def check_action(action: object) -> CancelAction:
    if action not in get_args(CancelAction):
        raise InvalidRunRequestError(
            f"cancel action {action!r} is unknown; use 'interrupt' or 'rollback'"
        )
    return cast(CancelAction, action)


def check_cancellable(run: Run) -> None:
    """Only ``pending``, ``running`` and ``interrupted`` runs can be cancelled."""
    if run.status not in ("pending", "running", "interrupted"):
        raise RunNotActiveError(
            f"run {run.run_id} has already ended ({run.status}); only a pending, running or "
            "interrupted run can be cancelled"
        )


def not_interrupted(run: Run) -> str:
    return (
        f"run {run.run_id} is {run.status}, not interrupted; only an interrupted run can be resumed"
    )


def cancel_event(status: RunStatus, action: CancelAction, reason: str | None) -> NewEvent:
    """``cancel.requested`` for a running run; ``run.finished`` for one cancelled at once."""
    if status == "running":
        return NewEvent("cancel.requested", {"action": action, "reason": reason})
    return NewEvent(
        "run.finished", {"status": "cancelled", "cancel_action": action, "reason": reason}
    )


def continued_reason(new_run_id: str) -> str:
    return f"continued by run {new_run_id}"


def continued_event(new_run_id: str) -> NewEvent:
    return NewEvent("run.finished", {"status": "success", "reason": continued_reason(new_run_id)})


def created_event(assistant: Assistant, run: ValidRun) -> NewEvent:
    return NewEvent(
        "run.created",
        {
            "assistant_id": assistant.assistant_id,
            "graph_id": assistant.graph_id,
            "multitask_strategy": run.strategy,
            "after_seconds": run.after_seconds,
            "deadline_at": None if run.deadline_at is None else run.deadline_at.isoformat(),
        },
    )


RESUMED_KEY = "tether_resumed"
"""Key of a run's ``kwargs``: the runs whose execution it continues, newest first."""


def with_resumed(run: ValidRun, closed: Sequence[Run]) -> ValidRun:
    """``run``, whose ``kwargs`` name the interrupted runs its creation ``closed`` (and those
    they continued) when its input answers their interrupt (a command with ``resume``): it
    continues their execution, so their effects are compensated and their checkpoints
    rolled back with its own. A run given new input starts a new execution: unchanged."""
    if not closed or run.input_kind != "command":
        return run
    command = loads(run.input_json)
    if not (isinstance(command, Mapping) and "resume" in command):
        return run
    chain: list[str] = []
    for ended in sorted(closed, key=lambda r: r.seq, reverse=True):
        for run_id in (ended.run_id, *(ended.kwargs.get(RESUMED_KEY) or ())):
            if run_id not in chain:
                chain.append(str(run_id))
    kwargs = {**loads(run.kwargs_json), RESUMED_KEY: chain}
    return replace(run, kwargs_json=dumps(kwargs))


def with_assistant(v: ValidRun, assistant: Assistant) -> ValidRun:
    """The run's options over its assistant's, merged as LangGraph's server merges them
    when a run is created: the assistant's ``config`` under the run's (``configurable``
    and ``metadata`` merged key by key, the run's values winning), and the assistant's
    ``context`` under the run's. The run keeps the result, so a later version of the
    assistant does not change a run already queued.

    Raises:
        InvalidRunRequestError: the merged ``config`` is not one a run may have (an
            assistant stored before its config was checked).
    """
    if not assistant.config and not assistant.context:
        return v
    kwargs = loads(v.kwargs_json)
    own = check_mapping(kwargs.get("config"), "config")
    base = check_mapping(assistant.config, "the assistant's config")
    config = {**base, **own}
    for part in ("configurable", "metadata"):
        merged = {
            **check_mapping(base.get(part), f"the assistant's config.{part}"),
            **check_mapping(own.get(part), f"config.{part}"),
        }
        if merged:
            config[part] = merged
    kwargs["config"] = config
    context = {**assistant.context, **check_mapping(kwargs.get("context"), "context")}
    if context:
        kwargs["context"] = context
    check_run_config(kwargs)
    return replace(v, kwargs_json=encode(kwargs, "kwargs", searchable=True))


def run_params(
    v: ValidRun, assistant: Assistant, tenant: str, thread_id: str, sealer: Sealer
) -> dict[str, Any]:
    """The named parameters of a run's INSERT (``deadline`` as a ``datetime``)."""
    return {
        "run": v.run_id,
        "tenant": tenant,
        "thread": thread_id,
        "assistant": assistant.assistant_id,
        "graph": assistant.graph_id,
        "strategy": v.strategy,
        "kwargs": sealer.seal_json_column(v.kwargs_json, "tether.run", v.run_id, "kwargs"),
        "input": sealer.seal_text(v.input_json, "tether.run", v.run_id, "input"),
        "input_kind": v.input_kind,
        "metadata": v.metadata_json,
        "max_attempts": v.max_attempts,
        "after": v.after_seconds,
        "deadline": v.deadline_at,
        "step_timeout": v.step_timeout,
    }


def where(filters: Sequence[tuple[str, Any]], mark: str) -> tuple[str, list[Any]]:
    """``col = <mark> AND …`` for each ``(column, value)`` whose value is not ``None``."""
    used = [(column, value) for column, value in filters if value is not None]
    return " AND ".join(f"{column} = {mark}" for column, _ in used), [v for _, v in used]


def finish_params(hold: Hold, outcome: Outcome, sealer: Sealer) -> dict[str, Any]:
    """The named parameters of the finish statements (§3.3.5), JSON encoded, private
    values sealed."""
    keep = outcome.values is KEEP
    thread, run = ("tether.thread", hold.thread_id), ("tether.run", hold.run_id)
    interrupts: str | None = None
    if outcome.interrupts is not None:
        interrupts = (
            dumps(sealer.seal(outcome.interrupts, *thread, "interrupts"))
            if sealer.enabled
            else dumps_display(outcome.interrupts)
        )
    thread_error = outcome.thread_error
    error = outcome.error
    return {
        "thread": hold.thread_id,
        "run": hold.run_id,
        "fence": hold.fence,
        "thread_status": outcome.thread_status,
        "keep": keep,
        "values": None if keep else sealer.seal(outcome.values, *thread, "values"),
        "interrupts": interrupts,
        "thread_error": None
        if thread_error is None
        else sealer.seal(thread_error, *thread, "error"),
        "status": outcome.status,
        "waiting_on": dumps([w.as_dict() for w in outcome.waiting_on]),
        "error": None if error is None else sealer.seal(error, *run, "error"),
        "reason": outcome.reason,
    }


def resume_input(command: Mapping[str, Any], run_id: str, sealer: Sealer) -> str:
    """The (sealed) JSON input of a resumed run: a LangGraph ``Command`` as a dict."""
    command = check_mapping(command, "command")
    if not command or not set(command) <= COMMAND_KEYS:
        raise InvalidRunRequestError(
            f"command must have some of the keys {', '.join(sorted(COMMAND_KEYS))}, "
            f"got {sorted(command)}"
        )
    return sealer.seal_text(encode(dict(command), "command"), "tether.run", run_id, "input")


def resumed_event(resumes: int) -> NewEvent:
    return NewEvent("run.resumed", {"resumes": resumes})


@dataclass(frozen=True)
class NewAssistant:
    """A checked assistant to insert; ``json`` is (config, context, metadata) encoded."""

    assistant_id: str
    graph_id: str
    name: str
    description: str | None
    json: tuple[str, str, str]


def new_assistant(
    graph_id: str,
    *,
    assistant_id: str | None,
    name: str | None,
    description: str | None,
    config: Mapping[str, Any] | None,
    context: Mapping[str, Any] | None,
    metadata: Mapping[str, Any] | None,
    if_exists: IfExists,
) -> NewAssistant:
    check_id(graph_id, "graph_id")
    check_if_exists(if_exists)
    check_assistant_config(config)
    config, context = mirrored(check_mapping(config, "config"), check_mapping(context, "context"))
    encoded = tuple(
        encode(dict(check_mapping(value, what)), what, searchable=True)
        for value, what in ((config, "config"), (context, "context"), (metadata, "metadata"))
    )
    return NewAssistant(
        new_id() if assistant_id is None else check_id(assistant_id, "assistant_id"),
        graph_id,
        graph_id if name is None else name,
        description,
        (encoded[0], encoded[1], encoded[2]),
    )


def mirrored(
    config: Mapping[str, Any], context: Mapping[str, Any]
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """An assistant's ``config.configurable`` and ``context`` kept in step, as LangGraph's
    server keeps them (``context`` replaced ``configurable`` in LangGraph 0.6): one given
    alone is copied to the other, so a graph reads it from either. Both given: as given."""
    configurable = check_mapping(config.get("configurable"), "config.configurable")
    if configurable and not context:
        return config, dict(configurable)
    if context and not configurable:
        return {**config, "configurable": dict(context)}, context
    return config, context


def check_if_exists(if_exists: object) -> IfExists:
    if if_exists not in ("raise", "do_nothing"):
        raise InvalidRunRequestError(
            f"if_exists {if_exists!r} is unknown; use 'raise' or 'do_nothing'"
        )
    return if_exists


def is_system_assistant(assistant: Assistant) -> bool:
    """Whether ``assistant`` is the system assistant of its graph, shared by every tenant.

    Only the runtime makes these (:func:`tether.runtime.worker.register_graphs`):
    the default tenant's, marked ``created_by: system``, under the id LangGraph
    derives from the graph id. An assistant any caller made, of any tenant
    (``""`` included), is its tenant's alone.
    """
    return (
        assistant.tenant_id == ""
        and assistant.metadata.get("created_by") == "system"
        and assistant.assistant_id == system_assistant_id(assistant.graph_id)
    )


def visible_assistant(
    candidates: Sequence[Assistant], assistant_id: str, tenant: str
) -> Assistant | None:
    """What ``assistant_id`` names for ``tenant`` among ``candidates``.

    In order: the tenant's own assistant with this id, a system assistant with
    this id, the system assistant of the graph with this id.
    """
    system = system_assistant_id(assistant_id)
    for wanted in (
        lambda a: a.assistant_id == assistant_id and a.tenant_id == tenant,
        lambda a: a.assistant_id == assistant_id and is_system_assistant(a),
        lambda a: a.assistant_id == system and is_system_assistant(a),
    ):
        for candidate in candidates:
            if wanted(candidate):
                return candidate
    return None


def check_not_a_graph_name(assistant_id: str, candidates: Sequence[Assistant]) -> None:
    """Refuse a new assistant id that already names a graph (its system assistant).

    ``candidates`` are the assistants ``assistant_id`` may name. Runs, crons and
    lookups that name the graph would otherwise reach the new assistant of its
    tenant instead of the graph's own one.
    """
    system = system_assistant_id(assistant_id)
    for candidate in candidates:
        if candidate.assistant_id == system and is_system_assistant(candidate):
            raise InvalidRunRequestError(
                f"assistant_id {assistant_id!r} is the id of graph {candidate.graph_id!r}, "
                "which names that graph's system assistant; choose another id"
            )


def existing_assistant(existing: Assistant, tenant: str, if_exists: IfExists) -> Assistant:
    """The answer when the assistant id is taken."""
    if existing.tenant_id == tenant and if_exists == "do_nothing":
        return existing
    raise AlreadyExistsError(f"assistant {existing.assistant_id!r} already exists")


def existing_thread(owner: str, thread_id: str, tenant: str, if_exists: IfExists) -> None:
    """Return quietly when ``if_exists="do_nothing"`` finds the tenant's own thread."""
    if owner == tenant and if_exists == "do_nothing":
        return
    raise AlreadyExistsError(f"thread {thread_id!r} already exists")


def finished_data(outcome: Outcome) -> dict[str, Any]:
    """The ``run.finished`` event's data: ``{status, error?, waiting_on?, reason?}``."""
    data: dict[str, Any] = {"status": outcome.status}
    if outcome.error is not None:
        data["error"] = dict(outcome.error)
    if outcome.waiting_on:
        data["waiting_on"] = [w.as_dict() for w in outcome.waiting_on]
    if outcome.reason:
        data["reason"] = outcome.reason
    return data


def attempts_exceeded(run: Run) -> Outcome:
    """The outcome of a claim beyond ``max_attempts`` (LangGraph's wording, §2.1)."""
    error = {
        "error": "RunAttemptsExceeded",
        "message": f"Run {run.run_id} exceeded max attempts ({run.max_attempts}): its worker "
        "stopped before finishing it on every attempt",
    }
    return Outcome(
        "error", "error", error=error, thread_error=error, reason="max attempts exceeded"
    )


def unreadable(run_id: str, exc: Exception) -> Outcome:
    """The outcome of a claimed run whose stored values cannot be opened (no key, a value
    in clear in an encrypted store, a tampered envelope): it fails, the worker goes on."""
    error = {
        "error": type(exc).__name__,
        "message": f"Run {run_id} cannot be read, so it was not started: {exc}",
    }
    return Outcome("error", "error", error=error, thread_error=error, reason="unreadable")


def thread_marks(assistant: Assistant) -> dict[str, str]:
    """What a run writes into its thread's metadata, as LangGraph's server does: the graph and
    the assistant (so ``threads.search(metadata={"graph_id": ...})`` finds the thread)."""
    return {"graph_id": assistant.graph_id, "assistant_id": assistant.assistant_id}
