"""The graphs the server's tests run through ``tether serve``, as a user's project would."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import interrupt
from typing_extensions import TypedDict

from tether.approvals import Approvers, Stop, arequest_approval


def _append(left: list[str], right: list[str]) -> list[str]:
    return [*left, *right]


class State(TypedDict, total=False):
    text: str
    trace: Annotated[list[str], _append]
    answer: Any
    n: int
    until: int


def _step(name: str) -> Any:
    def node(state: State) -> dict[str, Any]:
        return {"trace": [name]}

    return node


def _echo() -> Any:
    graph = StateGraph(State)
    for name in ("a", "b", "c"):
        graph.add_node(name, _step(name))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    return graph.compile()


echo = _echo()


def _question(state: State) -> dict[str, Any]:
    answer = interrupt({"question": f"ship {state.get('text', '')}?"})
    return {"answer": answer, "trace": ["asked"]}


def _ask() -> Any:
    graph = StateGraph(State)
    graph.add_node("before", _step("before"))
    graph.add_node("question", _question)
    graph.add_node("after", _step("after"))
    graph.add_edge(START, "before")
    graph.add_edge("before", "question")
    graph.add_edge("question", "after")
    graph.add_edge("after", END)
    return graph.compile()


ask = _ask()


async def _tick(state: State) -> dict[str, Any]:
    await asyncio.sleep(0.1)
    return {"n": state.get("n", 0) + 1}


def _ticker() -> Any:
    graph = StateGraph(State)
    graph.add_node("tick", _tick)
    graph.add_edge(START, "tick")
    graph.add_conditional_edges(
        "tick", lambda s: END if s.get("n", 0) >= s.get("until", 3) else "tick"
    )
    return graph.compile()


ticker = _ticker()


def _fail(state: State) -> dict[str, Any]:
    raise ValueError(f"boom: cannot handle {state.get('text')!r}")


def _boom() -> Any:
    graph = StateGraph(State)
    graph.add_node("fail", _fail)
    graph.add_edge(START, "fail")
    graph.add_edge("fail", END)
    return graph.compile()


boom = _boom()


class Chat(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]


async def _reply(state: Chat) -> dict[str, Any]:
    model = GenericFakeChatModel(messages=iter([AIMessage("hello from tether", id="reply-1")]))
    return {"messages": [await model.ainvoke(state["messages"])]}


def _chat() -> Any:
    graph = StateGraph(Chat)
    graph.add_node("reply", _reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    return graph.compile()


chat = _chat()


class Persona(TypedDict, total=False):
    tone: str
    signature: str


def _configured_reply(
    state: State, config: RunnableConfig, runtime: Runtime[Persona]
) -> dict[str, Any]:
    configurable = config.get("configurable") or {}
    context = runtime.context or {}
    return {
        "answer": {
            "model": configurable.get("model"),
            "temperature": configurable.get("temperature"),
            "tone": context.get("tone"),
            "signature": context.get("signature"),
            "tags": sorted(config.get("tags") or []),
        }
    }


def _configured() -> Any:
    """Answers with what its run was configured with: an assistant's options show here."""
    graph = StateGraph(State, context_schema=Persona)
    graph.add_node("reply", _configured_reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    return graph.compile()


configured = _configured()


def _side(name: str) -> Any:
    def node(state: State) -> dict[str, Any]:
        return {"answer": interrupt(f"{name}?"), "trace": [name]}

    return node


def _pair() -> Any:
    """Two nodes of one step that each interrupt, and whose answers both set ``answer``
    (a key that takes one value per step: resuming both is LangGraph's conflict error)."""
    graph = StateGraph(State)
    for name in ("left", "right"):
        graph.add_node(name, _side(name))
        graph.add_edge(START, name)
        graph.add_edge(name, END)
    return graph.compile()


pair = _pair()


def _nested() -> Any:
    inner = StateGraph(State)
    inner.add_node("deep", _echo())
    inner.add_edge(START, "deep")
    graph = StateGraph(State)
    graph.add_node("inner", inner.compile())
    graph.add_edge(START, "inner")
    return graph.compile()


nested = _nested()


async def _approve(state: State, config: RunnableConfig) -> dict[str, Any]:
    outcome = await arequest_approval(
        "ship",
        {"text": state.get("text", "")},
        why="a person checks what ships",
        approvers=Approvers(users=["dana"]),
        expires_in=timedelta(hours=1),
        on_expiry=Stop(),
        config=config,
    )
    return {"answer": outcome.decision, "trace": ["approved"]}


def _gated() -> Any:
    graph = StateGraph(State)
    graph.add_node("approve", _approve)
    graph.add_edge(START, "approve")
    graph.add_edge("approve", END)
    return graph.compile()


gated = _gated()


def broken() -> Any:
    """A graph factory that fails, as one missing its configuration does."""
    raise RuntimeError("AGENT_API_KEY is not set")


async def _recall(state: State, *, store: BaseStore) -> dict[str, Any]:
    """Async node: what the store holds for the user, through the node's ``store``."""
    user = state.get("text", "")
    found = await store.asearch(("memories", user), limit=50)
    return {"answer": sorted(item.key for item in found), "trace": ["recalled"]}


def _remember(state: State) -> dict[str, Any]:
    """Sync node: stores one more memory through ``get_store()`` and the sync API."""
    user = state.get("text", "")
    store = get_store()
    store.put(("memories", user), f"fact{state.get('n', 0)}", {"user": user})
    assert store.get(("memories", user), f"fact{state.get('n', 0)}") is not None
    return {"trace": ["remembered"]}


def _memory() -> Any:
    """Long-term memory as LangGraph's server gives it: the graph's store."""
    graph = StateGraph(State)
    graph.add_node("recall", _recall)
    graph.add_node("remember", _remember)
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "remember")
    graph.add_edge("remember", END)
    return graph.compile()


memory = _memory()
