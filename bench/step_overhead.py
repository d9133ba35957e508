"""Per-step cost of recording: tether's recorded model and durable tool vs bare LangGraph.

Both runs use the same agent (model -> tool -> model ..., ``--steps`` tool
calls), the same state (``add_messages``), the same scripted model and tool
function, and the same SQLite checkpointer with ``durability="sync"`` (every
checkpoint is written before the next step starts). The only difference is
that tether's run wraps the model with ``recorded`` and the tool with
``durable_tool``, so every answer and result is also written to the record store
and the step log before the node continues.

Each variant runs ``--repeat`` times, alternating; medians and best runs are compared
(the best run is the least disturbed by other work on the machine).

Usage: ``python bench/step_overhead.py [--steps 100] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _agents import ScriptedToolLoop, agent_loop, model_node
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import add_messages

from tether import open_checkpointer
from tether.steps import durable_tool, recorded


class ScriptedCounter(ScriptedToolLoop):
    """Scripted (fake) model: calls ``lookup`` with the next number until ``steps``."""

    tool_name = "lookup"
    argument = "item"
    input_tokens = 40
    output_tokens = 8

    @property
    def _llm_type(self) -> str:
        return "scripted-counter"

    def _progress(self, messages: Sequence[BaseMessage]) -> int:
        return sum(isinstance(m, ToolMessage) for m in messages)

    def _final(self, done: int) -> str:
        return f"looked up {done} items"


def lookup(item: int) -> str:
    """Look an item up."""
    return f"item {item}: in stock, ships in 2 days, price 10.00 EUR"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


async def one_run(variant: str, steps: int, db: Path, url: str | None = None) -> float:
    """Seconds per step of one full run on a fresh database."""
    model: Runnable[Any, Any] = ScriptedCounter(steps=steps)
    tool: BaseTool = StructuredTool.from_function(lookup)
    if variant == "tether":
        model = recorded(model, model_id="scripted-counter")
        tool = durable_tool(lookup)
    thread = f"bench-{variant}-{db.stem}"
    config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 4 * steps + 10}
    async with open_checkpointer(url or f"sqlite:///{db}") as saver:
        graph = agent_loop(State, model_node(model), tool, saver)
        started = time.perf_counter()
        result = await graph.ainvoke(
            {"messages": [HumanMessage("look everything up")]}, config, durability="sync"
        )
        elapsed = time.perf_counter() - started
    assert result["messages"][-1].content == f"looked up {steps} items"
    return elapsed / steps


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--url", default=None, help="checkpointer URL (default: a fresh SQLite file per run)"
    )
    args = parser.parse_args()
    timings: dict[str, list[float]] = {"langgraph": [], "tether": []}
    with tempfile.TemporaryDirectory() as tmp:
        await one_run("tether", 5, Path(tmp) / "warmup.db", args.url)
        for i in range(args.repeat):
            for variant in ("langgraph", "tether"):
                db = Path(tmp) / f"{variant}-{i}.db"
                timings[variant].append(await one_run(variant, args.steps, db, args.url))
    where = args.url.split(":", 1)[0] if args.url else "sqlite"
    print(f"{args.steps} steps x {args.repeat} runs, {where}, durability=sync")
    print(f"{'':<22}{'median':>10}{'best':>10}")
    for label, variant in (("bare LangGraph", "langgraph"), ("tether (recorded)", "tether")):
        runs = timings[variant]
        print(f"{label:<22}{statistics.median(runs) * 1000:>7.2f} ms{min(runs) * 1000:>7.2f} ms")
    median = statistics.median(timings["tether"]) / statistics.median(timings["langgraph"])
    best = min(timings["tether"]) / min(timings["langgraph"])
    print(f"overhead ratio: {median:.2f}x median, {best:.2f}x best (goal <= 1.10)")


if __name__ == "__main__":
    asyncio.run(main())
