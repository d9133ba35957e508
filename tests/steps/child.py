"""A child process for the steps tests: runs (or resumes) one small graph and exits.

Usage: ``python -m tests.steps.child <scenario> <url> <options-json> <thread> <workdir>``.
The parent sets ``TETHER_CRASH_AT`` to kill it at a boundary. The scripted model
and the tools write one line per real call to files in ``workdir``, so the parent
can count calls made across processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph, add_messages

from tests.steps.scripted import CountingScriptedModel, reply
from tether import open_checkpointer
from tether.steps import ReconcileResult, durable_tool, recorded


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _log(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def model_graph(work: Path) -> Any:
    """One node: a recorded model call, then more work in the same node."""
    model = recorded(
        CountingScriptedModel(replies=[reply("the answer")], calls_file=str(work / "model_calls"))
    )

    async def think(state: State) -> dict[str, Any]:
        answer = await model.ainvoke(state["messages"])
        _log(work / "after_model", "reached")
        return {"messages": [answer]}

    builder = StateGraph(State)
    builder.add_node("think", think)
    builder.add_edge(START, "think")
    builder.add_edge("think", END)
    return builder


def tool_graph(work: Path, variant: str) -> Any:
    """One node calling a durable tool whose effect is a line in ``effects``."""
    effects = work / "effects"
    crash_marker = work / "crashed"

    def effect(order: str, key: str) -> str:
        _log(effects, f"{order} {key}")
        if not crash_marker.exists():  # die after the effect, before the commit
            crash_marker.write_text("1")
            os.kill(os.getpid(), signal.SIGKILL)
        return f"refunded {order}"

    def reconcile(args: dict[str, Any], key: str) -> ReconcileResult | None:
        _log(work / "reconciled", key)
        done = effects.exists() and any(
            line.split(" ")[0] == args["order"] for line in effects.read_text().splitlines()
        )
        return ReconcileResult(f"refunded {args['order']} (found)") if done else None

    if variant == "keyed":

        @durable_tool(name="refund")
        def keyed(order: str, idempotency_key: str) -> str:
            """Refund an order."""
            return effect(order, idempotency_key)

        tool = keyed
    elif variant == "reconciled":

        @durable_tool(name="refund", reconcile=reconcile)
        def plain(order: str) -> str:
            """Refund an order."""
            return effect(order, "-")

        tool = plain
    else:

        @durable_tool(name="refund", safe_to_retry=variant == "safe", read_only=variant == "read")
        def bare(order: str) -> str:
            """Refund an order."""
            return effect(order, "-")

        tool = bare

    async def act(state: State) -> dict[str, Any]:
        result = await tool.ainvoke({"order": "A1"})
        return {"messages": [HumanMessage(str(result))]}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder


async def main(scenario: str, url: str, options: dict[str, Any], thread: str, work: Path) -> None:
    kind, _, variant = scenario.partition(":")
    builder = model_graph(work) if kind == "model" else tool_graph(work, variant)
    async with open_checkpointer(url, **options) as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread}}
        state = await graph.aget_state(config)
        payload = None if state.next else {"messages": [HumanMessage("go")]}
        try:
            result = await graph.ainvoke(payload, config)
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
            return
        print(json.dumps({"last": result["messages"][-1].content}))


if __name__ == "__main__":
    name, url, options, thread, work = sys.argv[1:6]
    asyncio.run(main(name, url, json.loads(options), thread, Path(work)))
