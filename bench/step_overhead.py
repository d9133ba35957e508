"""Per-step cost of recording: tether's recorded model and durable tool vs bare LangGraph.

Both runs use the same agent (model -> tool -> model ..., ``--steps`` tool
calls), the same state (``add_messages``), the same scripted model and tool
function, and the same checkpointer with ``durability="sync"`` (every
checkpoint is written before the next step starts). The only difference is
that tether's run wraps the model with ``recorded`` and the tool with
``durable_tool``, so every answer and result is also written to the record store
and the step log before the node continues.

Each ``--url`` (repeatable; one backend each) is measured in turn, with
``--repeat`` runs per variant, alternating; medians and best runs are compared
(the best run is the least disturbed by other work on the machine). Every run
uses a thread of its own, so runs on one database never replay each other.
Without ``--url`` all four backends run: ``memory://``, a fresh SQLite file,
and PostgreSQL and Redis (the test command's servers when
``TETHER_TEST_POSTGRES_URL``/``TETHER_TEST_REDIS_URL`` name them, else
throwaway ones started here).

By default the tool is a plain ``durable_tool`` (a claim is written before
each call); ``--read-only`` declares it ``read_only=True``, as a lookup is,
which writes no claim.

``--latency-ms D`` reaches PostgreSQL and Redis through a relay that delays
each direction by ``D`` ms (``_latency.py``): a database on another host, where
every round trip costs what it does in production. The same relay serves
both variants.

Usage: ``python bench/step_overhead.py [--steps 100] [--repeat 5] [--url URL ...] [--read-only]
[--latency-ms 0.25]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import ScriptedToolLoop, agent_loop, model_node
from _latency import delayed_url
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


async def one_run(variant: str, steps: int, url: str, read_only: bool = False) -> float:
    """Seconds per step of one full run on a thread of its own."""
    model: Runnable[Any, Any] = ScriptedCounter(steps=steps)
    tool: BaseTool = StructuredTool.from_function(lookup)
    if variant == "tether":
        model = recorded(model, model_id="scripted-counter")
        tool = durable_tool(lookup, read_only=read_only)
    thread = f"bench-{variant}-{uuid.uuid4().hex}"
    config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 4 * steps + 10}
    async with open_checkpointer(url) as saver:
        graph = agent_loop(State, model_node(model), tool, saver)
        started = time.perf_counter()
        result = await graph.ainvoke(
            {"messages": [HumanMessage("look everything up")]}, config, durability="sync"
        )
        elapsed = time.perf_counter() - started
    assert result["messages"][-1].content == f"looked up {steps} items"
    return elapsed / steps


@dataclass
class Figures:
    """One backend's seconds per step, by variant."""

    backend: str
    langgraph: list[float]
    tether: list[float]

    @property
    def median_ratio(self) -> float:
        return statistics.median(self.tether) / statistics.median(self.langgraph)

    @property
    def best_ratio(self) -> float:
        return min(self.tether) / min(self.langgraph)


async def measure(url: str, steps: int, repeat: int, read_only: bool = False) -> Figures:
    """Alternate bare and recorded runs on ``url``, after one warm-up run of each."""
    figures = Figures(url.split(":", 1)[0], [], [])
    for variant in ("langgraph", "tether"):
        await one_run(variant, 5, url)
    for _ in range(repeat):
        figures.langgraph.append(await one_run("langgraph", steps, url))
        figures.tether.append(await one_run("tether", steps, url, read_only))
    return figures


@contextlib.contextmanager
def default_urls(tmp: str) -> Iterator[list[str]]:
    """All four backends: memory, a fresh SQLite file, PostgreSQL and Redis."""
    from _servers import bench_servers

    with bench_servers() as servers:
        yield ["memory://", f"sqlite:///{tmp}/steps.db", servers["postgres"], servers["redis"]]


def report(figures: Figures) -> None:
    ms = 1000
    lg, te = figures.langgraph, figures.tether
    print(
        f"{figures.backend:<11}"
        f"{statistics.median(lg) * ms:>9.2f}{min(lg) * ms:>8.2f}"
        f"{statistics.median(te) * ms:>9.2f}{min(te) * ms:>8.2f}"
        f"{figures.median_ratio:>9.2f}x{figures.best_ratio:>7.2f}x",
        flush=True,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="declare the lookup tool read_only=True (no claim before it runs)",
    )
    parser.add_argument(
        "--url",
        action="append",
        default=[],
        help="a checkpointer URL (repeat for several backends; default: all four)",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="delay each direction to PostgreSQL and Redis by this much (a remote database)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        urls: Sequence[str] = args.url or stack.enter_context(default_urls(tmp))
        tool = "read_only lookup tool (no claim)" if args.read_only else "durable tool (claimed)"
        print(f"{args.steps} steps x {args.repeat} runs per variant, durability=sync, {tool}")
        if args.latency_ms:
            print(f"PostgreSQL and Redis {args.latency_ms} ms away each way (a relay)")
        print("ms per step; ratio = tether / bare LangGraph (goal <= 1.10)")
        print(f"{'':<11}{'bare LangGraph':>17}{'tether':>17}{'ratio':>17}")
        print(f"{'backend':<11}" + f"{'median':>9}{'best':>8}" * 2 + f"{'median':>10}{'best':>8}")
        for url in urls:
            remote = url.startswith(("postgres", "redis")) and args.latency_ms > 0
            with delayed_url(url, args.latency_ms if remote else 0) as reached:
                report(await measure(reached, args.steps, args.repeat, args.read_only))


if __name__ == "__main__":
    asyncio.run(main())
