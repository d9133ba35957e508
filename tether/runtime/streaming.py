"""LangGraph stream chunks to the events the LangGraph Agent Server sends over SSE.

A run is streamed with ``graph.astream(..., stream_mode=langgraph_modes(requested),
subgraphs=True)``: LangGraph is always asked for ``updates``, ``tasks`` and
``checkpoints`` (the worker needs them), whatever the client requested.
:class:`EventMapper` turns each ``(namespace, mode, chunk)`` into the events the
server (``langgraph_api/stream.py``) would send for the client's modes only:

- ``values``, ``updates``, ``custom``, ``tasks``, ``checkpoints``, ``debug``:
  the chunk as it is, under the mode's name. A subgraph's event is named
  ``"<mode>|<ns1>|<ns2>"``, and is sent only when the client asked for
  subgraphs.
- ``messages``: ``messages/metadata`` ``{id: {"metadata": ...}}`` the first time
  a message id is seen, then ``messages/partial`` ``[message so far]`` for each
  token chunk or ``messages/complete`` ``[message]`` for a whole message. The
  server names these without the subgraph suffix.
- ``messages-tuple``: ``messages`` (``messages|<ns>`` in a subgraph) with
  ``[message chunk, metadata]``.
- ``events``: the run is streamed with ``astream_events`` (:func:`graph_stream`)
  and every callback event but the root's stream chunks is sent as ``events``,
  whatever its namespace, as the server sends them.
- An interrupt reaches a client that asked only for ``values`` as a ``values``
  event carrying ``__interrupt__``: LangGraph 1.0.4 and later put interrupts in
  the values stream itself, so the ``updates`` chunk is not sent again (the
  server stopped re-sending it with those versions).
- Without subgraphs, a message made inside a subgraph is sent, whole, when the
  subgraph's node returns it to the root graph (its ``updates`` chunk), and its
  tokens are not: that is what LangGraph streams when run without subgraphs.

Beside the server's events, the mapper writes tether's ``node.started`` and
``node.finished`` (from ``tasks``, for every namespace, without inputs or
results) and keeps :attr:`EventMapper.interrupts` for the worker's
``interrupt`` event. Every payload is plain JSON data, serialised as the
server's ``serde.py`` does: messages as their ``model_dump()``, exceptions as
``{"error", "message"}`` with the message hidden unless the type is on the
server's allow-list.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from base64 import b64encode
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from datetime import timedelta, timezone
from decimal import Decimal
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
)
from pathlib import PurePath
from typing import Any
from zoneinfo import ZoneInfo

import orjson
from langchain_core.messages import (
    BaseMessage,
    BaseMessageChunk,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.errors import EmptyInputError, GraphBubbleUp, InvalidUpdateError, TaskNotFound
from langgraph.types import Send

from tether.runtime.errors import InvalidRunRequestError

__all__ = [
    "STREAM_MODES",
    "Event",
    "EventMapper",
    "error_event",
    "graph_stream",
    "json_default",
    "langgraph_modes",
    "metadata_event",
    "stream_modes",
    "to_json",
]

Event = tuple[str, Any]

STREAM_MODES = frozenset(
    {
        "values",
        "updates",
        "messages",
        "messages-tuple",
        "custom",
        "debug",
        "tasks",
        "checkpoints",
        "events",
    }
)
_NOT_YET = {
    "tools": "is only served on the v2 routes",
    "lifecycle": "is only served on the v2 routes",
}
# Exception types whose message the server shows (langgraph_api/serde.py).
_SHOWN_ERRORS = (
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    RuntimeError,
    RecursionError,
    TimeoutError,
    InvalidUpdateError,
    GraphBubbleUp,
    EmptyInputError,
    TaskNotFound,
)
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def stream_modes(requested: str | Iterable[str]) -> tuple[str, ...]:
    """The client's stream modes, deduplicated in order; a single mode may be a string.

    Raises:
        InvalidRunRequestError: A mode is unknown, or one tether cannot serve.
    """
    modes = (requested,) if isinstance(requested, str) else tuple(requested)
    for mode in modes:
        if mode in _NOT_YET:
            raise InvalidRunRequestError(f"stream_mode {mode!r} {_NOT_YET[mode]}")
        if mode not in STREAM_MODES:
            raise InvalidRunRequestError(
                f"stream_mode {mode!r} is not a stream mode; use one of "
                f"{', '.join(sorted(STREAM_MODES))}"
            )
    return tuple(dict.fromkeys(modes))


def langgraph_modes(requested: str | Iterable[str]) -> list[str]:
    """The ``stream_mode`` list to give ``astream`` for the client's modes.

    The client's modes, plus ``updates``, ``tasks`` and ``checkpoints``;
    ``messages-tuple`` is LangGraph's ``messages``, and ``events`` is not a
    mode of ``astream`` (the run is streamed with ``astream_events`` instead).

    Raises:
        InvalidRunRequestError: As :func:`stream_modes`.
    """
    modes = set(stream_modes(requested))
    wanted = (modes | {"updates", "tasks", "checkpoints"}) - {"messages-tuple", "events"}
    if "messages-tuple" in modes:
        wanted.add("messages")
    return sorted(wanted)


def graph_stream(
    graph: Any, payload: Any, config: dict[str, Any], requested: Iterable[str], **kwargs: Any
) -> AsyncGenerator[tuple[tuple[str, ...], str, Any]]:
    """``(namespace, mode, chunk)`` for each chunk of the run, as :meth:`EventMapper.map` takes.

    Without ``events`` among the client's modes, ``graph.astream(...,
    subgraphs=True)``. With it, ``graph.astream_events(version="v2")`` as the
    server runs it: the root run's ``on_chain_stream`` events carry the same
    chunks, and every other event comes as ``((), "events", event)``
    (LangSmith-hidden ones left out).
    """
    modes = langgraph_modes(requested)
    if "events" not in stream_modes(requested):
        stream: AsyncGenerator[tuple[tuple[str, ...], str, Any]] = graph.astream(
            payload, config, stream_mode=modes, subgraphs=True, **kwargs
        )
        return stream
    return _with_callback_events(graph, payload, config, modes, **kwargs)


async def _with_callback_events(
    graph: Any, payload: Any, config: dict[str, Any], modes: list[str], **kwargs: Any
) -> AsyncGenerator[tuple[tuple[str, ...], str, Any]]:
    root = config.get("run_id") or uuid.uuid4()
    events = graph.astream_events(
        payload,
        {**config, "run_id": root},
        version="v2",
        stream_mode=modes,
        subgraphs=True,
        **kwargs,
    )
    async with contextlib.aclosing(events):
        async for event in events:
            if "langsmith:hidden" in (event.get("tags") or ()):
                continue
            if event["event"] == "on_chain_stream" and event["run_id"] == str(root):
                ns, mode, chunk = event["data"]["chunk"]
                yield tuple(ns), mode, chunk
            else:
                yield (), "events", event


def metadata_event(run_id: str | uuid.UUID, attempt: int) -> Event:
    """The first event of every run's stream."""
    return "metadata", {"run_id": str(run_id), "attempt": attempt}


def error_event(exc: BaseException) -> Event:
    """The ``error`` event the server sends when a run fails."""
    return "error", json_default(exc)


def _decimal(value: Decimal) -> int | float:
    exponent = value.as_tuple().exponent
    whole = value.is_finite() and isinstance(exponent, int) and exponent >= 0
    return int(value) if whole else float(value)


_ADDRESSES = (IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface, IPv6Network)
_CONVERTERS: tuple[tuple[type | tuple[type, ...], Callable[[Any], Any]], ...] = (
    ((set, frozenset, deque), list),
    ((timezone, ZoneInfo), lambda zone: zone.tzname(None)),
    (timedelta, lambda delta: delta.total_seconds()),
    (Decimal, _decimal),
    ((uuid.UUID, PurePath, *_ADDRESSES), str),
    (re.Pattern, lambda pattern: pattern.pattern),
    ((bytes, bytearray), lambda data: b64encode(data).decode()),
)


def json_default(obj: Any) -> Any:
    """What the server's serialiser makes of a value orjson cannot write itself."""
    if isinstance(obj, Send):
        return {"node": obj.node, "args": obj.arg}
    if not isinstance(obj, type):
        for method in ("model_dump", "dict", "_asdict"):
            if callable(getattr(obj, method, None)):
                return getattr(obj, method)()
    if isinstance(obj, BaseException):
        shown = isinstance(obj, _SHOWN_ERRORS)
        return {
            "error": type(obj).__name__,
            "message": str(obj) if shown else "An internal error occurred",
        }
    for types, convert in _CONVERTERS:
        if isinstance(obj, types):
            return convert(obj)
    return None  # the server writes null for anything else


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATES.sub("?", value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_without_surrogates(v) for v in value]
    return value


def to_json(value: Any) -> Any:
    """``value`` as plain JSON data, exactly as the server would write it.

    Lone surrogates become ``?`` and NUL characters U+FFFD, as in the server.
    """
    option = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
    try:
        raw = orjson.dumps(value, default=json_default, option=option)
    except TypeError as exc:
        if "surrogates not allowed" not in str(exc):
            raise
        raw = orjson.dumps(_without_surrogates(value), default=json_default, option=option)
    if b"\\u0000" in raw:
        raw = raw.replace(b"\\u0000", b"\\ufffd")
    return orjson.loads(raw)


def _message(value: Any) -> BaseMessage:
    if isinstance(value, BaseMessage):
        return value
    return convert_to_messages([value])[0]


class EventMapper:
    """Maps one run's ``astream(..., subgraphs=True)`` chunks to server events.

    Args:
        stream_mode: The modes the client requested (LangGraph's default is
            ``["values"]``).
        subgraphs: Whether the client asked for subgraph events.
        node_events: Also write tether's ``node.started`` / ``node.finished``.

    Raises:
        InvalidRunRequestError: A mode is unknown or not served.
    """

    def __init__(
        self,
        stream_mode: str | Iterable[str] = ("values",),
        *,
        subgraphs: bool = False,
        node_events: bool = True,
    ) -> None:
        self.requested = frozenset(stream_modes(stream_mode))
        self.subgraphs = subgraphs
        self.node_events = node_events
        self._messages: dict[str, BaseMessage] = {}  # messages mode: the message so far, by id
        self._hidden: dict[str, Any] = {}  # metadata of subgraph messages kept back, by id
        self._interrupts: dict[str, dict[str, Any]] = {}

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        """The run's interrupts so far, ``{"id", "ns", "value"}``, each once (innermost ns)."""
        return list(self._interrupts.values())

    def map(self, ns: Sequence[str], mode: str, chunk: Any) -> list[Event]:
        """The events for one chunk of ``astream(..., subgraphs=True)``, in order."""
        ns = tuple(ns)
        events: list[Event] = []
        if mode == "tasks" and self.node_events:
            events.append(self._node_event(ns, chunk))
        if mode == "updates" and isinstance(chunk, dict) and "__interrupt__" in chunk:
            self._remember_interrupts(ns, chunk["__interrupt__"])
        if mode == "messages":
            return events + self._messages_events(ns, chunk)
        if mode == "events":  # LangChain's callback events, namespace and all, unfiltered
            return [("events", to_json(chunk))] if "events" in self.requested else []
        if mode == "updates" and not ns and self._hidden:
            events += self._surfaced(chunk)
        if mode not in self.requested or (ns and not self.subgraphs):
            return events
        if mode == "debug" and chunk.get("type") == "checkpoint":
            chunk = {**chunk, "payload": _debug_checkpoint(chunk["payload"])}
        events.append((_name(mode, ns), to_json(chunk)))
        return events

    def _messages_events(self, ns: tuple[str, ...], chunk: Any) -> list[Event]:
        if not self.requested & {"messages", "messages-tuple"}:
            return []
        raw, meta = chunk
        if ns and not self.subgraphs:
            self._hide(_message(raw), meta)
            return []
        return self._message_events(ns, raw, meta)

    def _message_events(self, ns: tuple[str, ...], raw: Any, meta: Any) -> list[Event]:
        if "messages-tuple" in self.requested:
            return [(_name("messages", ns), to_json([raw, meta]))]
        msg = _message(raw)
        msg_id = str(msg.id)
        events: list[Event] = []
        before = self._messages.get(msg_id)
        if before is None:
            events.append(("messages/metadata", {msg_id: {"metadata": to_json(meta)}}))
            self._messages[msg_id] = msg
        elif isinstance(before, BaseMessageChunk) and isinstance(msg, BaseMessageChunk):
            self._messages[msg_id] = before + msg
        else:
            self._messages[msg_id] = msg
        name = "messages/partial" if isinstance(msg, BaseMessageChunk) else "messages/complete"
        events.append((name, to_json([message_chunk_to_message(self._messages[msg_id])])))
        return events

    def _hide(self, msg: BaseMessage, meta: Any) -> None:
        """Keep a subgraph's message back: the client did not ask for subgraphs."""
        self._hidden[str(msg.id)] = meta

    def _surfaced(self, update: Any) -> list[Event]:
        """Kept-back messages in a root node's update, as LangGraph reports them then."""
        events: list[Event] = []
        for msg in _messages_in(update):
            meta = self._hidden.pop(str(msg.id), None)
            if meta is not None:
                events += self._message_events((), msg, meta)
        return events

    def _node_event(self, ns: tuple[str, ...], task: dict[str, Any]) -> Event:
        common = {"node": task["name"], "task_id": task["id"], "ns": list(ns)}
        if "result" not in task:
            return "node.started", {**common, "triggers": list(task.get("triggers") or ())}
        finished: dict[str, Any] = {
            **common,
            "interrupts": [_field(i, "id") for i in task.get("interrupts") or ()],
        }
        if task.get("error") is not None:
            finished["error"] = to_json(task["error"])
        return "node.finished", finished

    def _remember_interrupts(self, ns: tuple[str, ...], interrupts: Iterable[Any]) -> None:
        for item in interrupts:
            interrupt_id = str(_field(item, "id"))
            if interrupt_id not in self._interrupts:
                value = to_json(_field(item, "value"))
                self._interrupts[interrupt_id] = {
                    "id": interrupt_id,
                    "ns": list(ns),
                    "value": value,
                }


def _messages_in(value: Any, depth: int = 0) -> Iterable[BaseMessage]:
    """The messages in an ``updates`` chunk: ``{node: {channel: message or list}}``."""
    if isinstance(value, BaseMessage):
        yield value
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from _messages_in(item, depth + 1)
    elif depth < 3 and isinstance(value, list | tuple):
        for item in value:
            yield from _messages_in(item, depth + 1)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _name(mode: str, ns: tuple[str, ...]) -> str:
    return "|".join((mode, *ns))


def _config_checkpoint(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """The server's ``runnable_config_to_checkpoint``."""
    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("thread_id") or not configurable.get("checkpoint_id"):
        return None
    checkpoint = {k: configurable[k] for k in ("checkpoint_id", "thread_id")}
    if "checkpoint_ns" in configurable:
        checkpoint["checkpoint_ns"] = configurable["checkpoint_ns"] or ""
    if "checkpoint_map" in configurable:
        checkpoint["checkpoint_map"] = configurable["checkpoint_map"]
    return checkpoint


def _debug_checkpoint(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    """The server adds ``checkpoint`` and ``parent_checkpoint`` to debug checkpoints."""
    if not payload:
        return None
    tasks = []
    for task in payload["tasks"]:
        state = task.get("state")
        if isinstance(state, dict) and state.get("configurable"):
            without_state = {k: v for k, v in task.items() if k != "state"}
            tasks.append({**without_state, "checkpoint": state["configurable"]})
        else:
            tasks.append(task)
    return {
        **payload,
        "checkpoint": _config_checkpoint(payload["config"]),
        "parent_checkpoint": _config_checkpoint(payload.get("parent_config")),
        "tasks": tasks,
    }
