"""Shared pieces of the encryption tests: key rings, a small real graph, raw storage reads."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from tests.backends import Backend
from tests.raw_storage import raw_dump
from tether.checkpointing._delegating import innermost
from tether.checkpointing.encryption import KeyRing

CANARY = "pii-canary-7Hq2xZ@example.org"

# One random key per id for the whole session: rings built from the same ids agree.
_KEYS: dict[str, bytes] = {}


def key(key_id: str) -> bytes:
    """The session's key for ``key_id``."""
    return _KEYS.setdefault(key_id, os.urandom(32))


def ring(*key_ids: str, allow_plaintext: bool = False) -> KeyRing:
    """A ring of the session keys ``key_ids``, the first active."""
    return KeyRing([(k, key(k)) for k in key_ids], allow_plaintext=allow_plaintext)


def spec(*key_ids: str) -> str:
    """``TETHER_ENCRYPTION_KEYS`` text for the session keys ``key_ids``."""
    return ",".join(f"{k}:{base64.b64encode(key(k)).decode()}" for k in key_ids)


# -- a small real graph: a str channel, messages, a tool result, an interrupt --------


class State(TypedDict):
    note: str
    messages: Annotated[list[AnyMessage], add_messages]


def _agent(state: State) -> dict[str, Any]:
    call = {"id": "call-1", "name": "lookup_customer", "args": {"email": CANARY}}
    return {
        "note": f"customer wrote from {CANARY}",
        "messages": [AIMessage(content="looking the customer up", tool_calls=[call])],
    }


def _tool(state: State) -> dict[str, Any]:
    """A scripted tool: returns a fixed record that contains the canary."""
    return {"messages": [ToolMessage(content=f"record for {CANARY}", tool_call_id="call-1")]}


def _review(state: State) -> dict[str, Any]:
    answer = interrupt(f"send the refund to {CANARY}?")
    return {"messages": [AIMessage(content=f"reviewer said: {answer}")]}


def build_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """agent -> tool -> review (interrupts) -> END."""
    graph = StateGraph(State)
    graph.add_node("agent", _agent)
    graph.add_node("tool", _tool)
    graph.add_node("review", _review)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "tool")
    graph.add_edge("tool", "review")
    graph.add_edge("review", END)
    return graph.compile(checkpointer=checkpointer)


def graph_input() -> dict[str, Any]:
    return {"note": "", "messages": [HumanMessage(content=f"hi, I am {CANARY}")]}


def graph_config(thread_id: str) -> dict[str, Any]:
    """Config with custom metadata holding the canary."""
    return {"configurable": {"thread_id": thread_id}, "metadata": {"customer_email": CANARY}}


async def run_graph(saver: BaseCheckpointSaver[Any], thread_id: str) -> dict[str, Any]:
    """Run to the interrupt (pending writes stored), then resume to the end."""
    graph = build_graph(saver)
    config = graph_config(thread_id)
    await graph.ainvoke(graph_input(), config)
    result: dict[str, Any] = await graph.ainvoke(Command(resume=f"yes, {CANARY}"), config)
    return result


def run_graph_sync(saver: BaseCheckpointSaver[Any], thread_id: str) -> dict[str, Any]:
    graph = build_graph(saver)
    config = graph_config(thread_id)
    graph.invoke(graph_input(), config)
    result: dict[str, Any] = graph.invoke(Command(resume=f"yes, {CANARY}"), config)
    return result


# -- raw storage ----------------------------------------------------------------


def canary_forms(text: str = CANARY) -> list[bytes]:
    """The canary as stored in clear, as hex (bytea text) and as base64 at every alignment."""
    raw = text.encode()
    forms = [raw, raw.hex().encode()]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw)
        start = (shift * 4 + 2) // 3 + 1  # skip characters mixed with the padding bytes
        forms.append(encoded[start:-4])
    return forms


def contains_canary(blob: bytes) -> bool:
    return any(form in blob for form in canary_forms())


async def raw_storage(backend: Backend, saver: BaseCheckpointSaver[Any]) -> bytes:
    """Everything this test's backend stores, read around tether and LangGraph."""
    inner: Any = innermost(saver)
    if backend.name == "memory":
        return repr((inner.storage, inner.writes, inner.blobs)).encode()
    if backend.name == "sqlite":
        path = Path(backend.url.removeprefix("sqlite:///"))
        files = [path, path.with_name(path.name + "-wal")]
        return b"".join(p.read_bytes() for p in files if p.exists())
    rows = await raw_dump(backend, saver)
    assert rows, f"the {backend.name} test storage holds nothing at all"
    return "\n".join(rows).encode()
