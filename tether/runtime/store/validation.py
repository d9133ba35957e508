"""Checking a :class:`~tether.runtime.store.base.NewRun` before any write (design §3.3.7).

:func:`validate` turns a request into a :class:`ValidRun`: every field checked,
defaults applied, JSON encoded. Each problem raises
:class:`~tether.runtime.errors.InvalidRunRequestError` naming the field. Both
backends call it first, so they accept and refuse exactly the same requests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from tether.compensation import CompensationConfigError, run_policy
from tether.runtime.errors import InvalidRunRequestError
from tether.runtime.ids import check_id, new_id
from tether.runtime.models import STREAM_MODES, Durability, InputKind, MultitaskStrategy
from tether.runtime.multitask import check_strategy
from tether.runtime.store.base import NewRun
from tether.runtime.store.encoding import dumps, find_nul
from tether.runtime.webhooks import WebhookRefusedError, url_form

__all__ = [
    "COMMAND_KEYS",
    "ValidRun",
    "check_assistant_config",
    "check_mapping",
    "check_run_config",
    "encode",
    "validate",
]

COMMAND_KEYS = frozenset({"resume", "update", "goto", "graph"})
# LangGraph's 400 text (langgraph_api models/run.py).
RESUME_NEEDS_THREAD = "You must provide a thread_id when resuming."


@dataclass(frozen=True)
class ValidRun:
    """A checked request: ids, encoded JSON columns, and the thread to use or create."""

    run_id: str
    assistant_id: str
    thread_id: str | None  # None: a new temporary thread
    temporary: bool
    create_thread: bool
    strategy: MultitaskStrategy
    input_kind: InputKind
    input_json: str
    kwargs_json: str
    metadata_json: str
    after_seconds: float
    deadline_at: datetime | None
    step_timeout: float | None
    max_attempts: int


def encode(value: Any, what: str, *, searchable: bool = False) -> str:
    """``value`` as JSON, or ``InvalidRunRequestError`` naming ``what``.

    ``searchable`` values (metadata, config: ``jsonb`` on PostgreSQL) may not
    hold NUL characters; the same request is refused on every backend.
    """
    try:
        text = dumps(value)
    except TypeError as exc:
        raise InvalidRunRequestError(f"{what}: {exc}") from exc
    problem = find_nul(text, what) if searchable else None
    if problem:
        raise InvalidRunRequestError(problem)
    return text


def check_mapping(value: object, what: str) -> Mapping[str, Any]:
    """``value`` if it is a mapping with string keys (``None`` counts as empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidRunRequestError(f"{what} must be a mapping with string keys")
    return value


MAX_SECONDS = 10 * 366 * 86400
"""The longest delay or timeout a run takes: ten years (a later time is past what dates hold)."""


def _seconds(value: object, what: str, *, allow_zero: bool) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    number = float(value) if ok else math.nan  # type: ignore[arg-type]
    if not ok or not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidRunRequestError(f"{what} must be a finite number of seconds {bound}")
    if number > MAX_SECONDS:
        raise InvalidRunRequestError(
            f"{what} must be at most {MAX_SECONDS} seconds (ten years), got {number:g}"
        )
    return number


def _check_stream_mode(kwargs: Mapping[str, Any]) -> None:
    mode = kwargs.get("stream_mode")
    if mode is None:
        return
    modes = [mode] if isinstance(mode, str) else mode
    if not isinstance(modes, list | tuple) or not modes:
        raise InvalidRunRequestError("stream_mode must be a stream mode or a non-empty list")
    unknown = [m for m in modes if m not in STREAM_MODES]
    if unknown:
        raise InvalidRunRequestError(
            f"stream_mode {unknown[0]!r} is unknown; use one of {', '.join(STREAM_MODES)}"
        )


DURABILITIES: tuple[Durability, ...] = get_args(Durability)


def check_run_config(kwargs: Mapping[str, Any]) -> None:
    """A run's ``config``: an object whose ``configurable`` does not set what LangGraph and
    tether set themselves, and whose other fields have the types LangGraph takes.

    Keys starting with ``__`` are LangGraph's (``__pregel_checkpointer``, ...) and
    tether's (``__tether_budget``, ...): a caller setting one would replace the
    run's checkpointer, budget or replay mode, not configure the graph. Checked when
    a run is created, and again by the worker before the run starts (a row written by
    a version that checked less).
    """
    config = check_mapping(kwargs.get("config"), "config")
    configurable = check_mapping(config.get("configurable"), "config.configurable")
    reserved = sorted(k for k in configurable if k.startswith("__"))
    if reserved:
        raise InvalidRunRequestError(
            f"config.configurable key {reserved[0]!r} is reserved: keys starting with '__' "
            "are set by LangGraph and tether, not by a run's caller"
        )
    try:  # a policy compensation would refuse only once the run failed, undoing nothing
        run_policy(config)
    except CompensationConfigError as exc:
        raise InvalidRunRequestError(f"config.{exc}") from None
    _check_config_fields(config)


def check_assistant_config(config: object) -> None:
    """An assistant's ``config``: what :func:`check_run_config` allows a run, since every
    run of the assistant starts from it (its ``configurable`` keys included)."""
    check_run_config({"config": config})


def _check_config_fields(config: Mapping[str, Any]) -> None:
    """The ``RunnableConfig`` fields a worker merges or hands to LangGraph, in their types.

    Unchecked, a ``metadata`` that was not an object stopped the worker's execution
    before the graph started, and the run stayed ``running``; the others failed the run.
    """
    check_mapping(config.get("metadata"), "config.metadata")
    tags = config.get("tags")
    if tags is not None and (
        not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags)
    ):
        raise InvalidRunRequestError("config.tags must be a list of strings")
    for name in ("recursion_limit", "max_concurrency"):
        value = config.get(name)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            raise InvalidRunRequestError(f"config.{name} must be a whole number >= 1")
    run_name = config.get("run_name")
    if run_name is not None and not isinstance(run_name, str):
        raise InvalidRunRequestError("config.run_name must be a string")
    if config.get("callbacks") is not None:
        raise InvalidRunRequestError(
            "config.callbacks cannot be sent with a run (callbacks are objects of the "
            "process that runs the graph); leave it out"
        )


def _check_run_options(kwargs: Mapping[str, Any]) -> None:
    """The LangGraph options a worker passes on: refused here, not when the run starts."""
    _check_stream_mode(kwargs)
    check_run_config(kwargs)
    durability = kwargs.get("durability")
    if durability is not None and durability not in DURABILITIES:
        raise InvalidRunRequestError(
            f"durability {durability!r} is unknown; use one of {', '.join(DURABILITIES)}"
        )
    for name in ("interrupt_before", "interrupt_after"):
        nodes = kwargs.get(name)
        if nodes is None or nodes == "*":
            continue
        if not isinstance(nodes, list | tuple) or not all(isinstance(n, str) for n in nodes):
            raise InvalidRunRequestError(f"{name} must be '*' or a list of node names")
    checkpoint_id = kwargs.get("checkpoint_id")
    if checkpoint_id is not None:
        check_id(checkpoint_id, "checkpoint_id")
    webhook = kwargs.get("webhook")
    if webhook is not None:
        try:  # its form only: the project's policy is the server's and the worker's to apply
            url_form(webhook)
        except WebhookRefusedError as refused:
            raise InvalidRunRequestError(str(refused)) from None


def _command(request: NewRun) -> InputKind:
    if request.command is None:
        return "input"
    if request.input is not None:
        raise InvalidRunRequestError("input and command were both given; give one of them")
    command = check_mapping(request.command, "command")
    unknown = sorted(set(command) - COMMAND_KEYS)
    if unknown or not command:
        raise InvalidRunRequestError(
            f"command must have some of the keys {', '.join(sorted(COMMAND_KEYS))}"
            + (f"; {', '.join(unknown)} is not one" if unknown else "")
        )
    if "resume" in command and request.thread_id is None:
        raise InvalidRunRequestError(RESUME_NEEDS_THREAD)
    return "command"


def validate(request: NewRun, *, now: datetime) -> ValidRun:
    """Check ``request`` (``now`` is timezone-aware, for the deadline) and encode it."""
    if not isinstance(request, NewRun):
        raise InvalidRunRequestError(f"a run request must be a NewRun, got {type(request)!r}")
    assistant_id = check_id(request.assistant_id, "assistant_id")
    thread_id = None if request.thread_id is None else check_id(request.thread_id, "thread_id")
    run_id = new_id() if request.run_id is None else check_id(request.run_id, "run_id")
    input_kind = _command(request)
    strategy = check_strategy(request.multitask_strategy)
    if request.if_not_exists not in ("create", "reject"):
        raise InvalidRunRequestError(
            f"if_not_exists {request.if_not_exists!r} is unknown; use 'create' or 'reject'"
        )
    if request.on_completion not in (None, "delete", "keep"):
        raise InvalidRunRequestError(
            f"on_completion {request.on_completion!r} is unknown; use 'delete' or 'keep'"
        )
    after = _seconds(request.after_seconds, "after_seconds", allow_zero=True)
    step_timeout = (
        None
        if request.step_timeout is None
        else _seconds(request.step_timeout, "step_timeout", allow_zero=False)
    )
    deadline = request.deadline_at
    if deadline is not None:
        if not isinstance(deadline, datetime) or deadline.tzinfo is None:
            raise InvalidRunRequestError("deadline_at must be a timezone-aware datetime")
        if deadline <= now:
            raise InvalidRunRequestError(
                f"deadline_at {deadline.isoformat()} is in the past (now {now.isoformat()})"
            )
    attempts = request.max_attempts
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
        raise InvalidRunRequestError(f"max_attempts must be an integer >= 1, got {attempts!r}")
    kwargs = dict(check_mapping(request.kwargs, "kwargs"))
    _check_run_options(kwargs)
    stateless = thread_id is None
    on_completion = request.on_completion or ("delete" if stateless else "keep")
    temporary = stateless and on_completion == "delete"
    kwargs.update(on_completion=on_completion, temporary=temporary)
    payload = request.command if input_kind == "command" else request.input
    return ValidRun(
        run_id=run_id,
        assistant_id=assistant_id,
        thread_id=thread_id,
        temporary=temporary,
        create_thread=stateless or request.if_not_exists == "create",
        strategy=strategy,
        input_kind=input_kind,
        input_json=encode(payload, "command" if input_kind == "command" else "input"),
        kwargs_json=encode(kwargs, "kwargs", searchable=True),
        metadata_json=encode(
            dict(check_mapping(request.metadata, "metadata")), "metadata", searchable=True
        ),
        after_seconds=after,
        deadline_at=deadline,
        step_timeout=step_timeout,
        max_attempts=attempts,
    )
