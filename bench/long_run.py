"""O(n) storage: a long agent run with tether vs LangGraph's two message channels.

Runs the same agent (model -> tool -> model ..., one tool call per step, each
tool result ~2 KB) for ``--steps`` steps on a fresh SQLite checkpointer three
times:

* ``langgraph add_messages`` - the default ``Annotated[list, add_messages]``;
* ``langgraph DeltaChannel`` - the messages channel on ``DeltaChannel`` (each
  checkpoint stores the step's new messages, a full snapshot every 100 updates);
* ``tether`` - recorded model and durable tool (so every answer and result is
  also in the step log), ``transcript_channel()`` plus a ``ContextBuilder`` that
  folds old messages into a summary past 4,000 tokens.

It prints the bytes each stores (checkpoints, writes and, for tether, its
records and step log), bytes per step, and how long ``get_state`` takes at the
last step divided by at step 10. The model and the summarizer are scripted
(deterministic, offline).

Usage: ``python bench/long_run.py [--steps 1000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import aiosqlite
from _agents import ScriptedBenchModel, ScriptedToolLoop, agent_loop, model_node
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import add_messages

from tether import open_checkpointer
from tether.steps import ContextBuilder, durable_tool, recorded, transcript_channel

RESULT_BYTES = 2048
SNAPSHOT_BYTES_NOTE = "DeltaChannel default snapshot_frequency=100"


class ScriptedPager(ScriptedToolLoop):
    """Scripted (fake) model: asks for page n+1 after reading page n, stops at ``steps``."""

    tool_name = "fetch"
    argument = "page"
    input_tokens = 50
    output_tokens = 10

    @property
    def _llm_type(self) -> str:
        return "scripted-pager"

    def _progress(self, messages: Sequence[BaseMessage]) -> int:
        return _last_page(messages)

    def _final(self, done: int) -> str:
        return f"read {done} pages"


class ScriptedSummarizer(ScriptedBenchModel):
    """Scripted (fake) summarizer: names the pages read so far."""

    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def _reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        pages = [int(p) for p in re.findall(r"page (\d+):", str(messages[-1].content))]
        return AIMessage(f"Pages 1 to {max(pages, default=0)} were read; nothing else matters.")


def _last_page(messages: Sequence[BaseMessage]) -> int:
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            return int(str(message.content).split(":", 1)[0].removeprefix("page "))
        if message.type == "system" and "Pages 1 to" in str(message.content):
            return int(re.findall(r"Pages 1 to (\d+)", str(message.content))[0])
    return 0


def fetch_page(page: int) -> str:
    """Fetch one page of the report."""
    body = f"line {page} of the report. " * (RESULT_BYTES // 24)
    return f"page {page}: {body}"[:RESULT_BYTES]


def _delta_fold(state: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    for write in writes:
        state = add_messages(state, write)  # type: ignore[arg-type,assignment]
    return state


class DefaultState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class DeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_delta_fold, list)]


class TetherState(TypedDict):
    messages: Annotated[list[AnyMessage], transcript_channel()]
    summary: str


def langgraph_agent(state_type: type, steps: int, saver: Any) -> Any:
    fetch: BaseTool = tool(fetch_page, parse_docstring=False)
    fetch.name = "fetch"
    return agent_loop(state_type, model_node(ScriptedPager(steps=steps)), fetch, saver)


def tether_agent(steps: int, saver: Any) -> Any:
    model = recorded(ScriptedPager(steps=steps), model_id="scripted-pager")
    context = ContextBuilder(max_tokens=4_000, summarizer=recorded(ScriptedSummarizer()))
    fetch = durable_tool(fetch_page, name="fetch")

    async def agent(state: TetherState) -> dict[str, Any]:
        window = await context.abuild(state["messages"], state.get("summary", ""))
        answer = await model.ainvoke(window.messages)
        return {"messages": [*window.removals, answer], **window.update}

    return agent_loop(TetherState, agent, fetch, saver)


async def stored_bytes(db: Path) -> int:
    """Bytes of every stored row: checkpoints, writes, and tether's records and steps."""
    queries = [
        "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints",
        "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes",
    ]
    async with aiosqlite.connect(db) as conn:
        tables = {
            row[0]
            for row in await conn.execute_fetchall(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            )
        }
        if "tether_records" in tables:
            queries += [
                "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM tether_records",
                "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM tether_steps",
            ]
        total = 0
        for sql in queries:
            rows = list(await conn.execute_fetchall(sql))
            total += int(rows[0][0])
    return total


async def _get_state_ms(graph: Any, config: Any, repeat: int = 15) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        await graph.aget_state(config)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


async def _config_at_step(saver: Any, thread: Any, step: int) -> Any:
    """The config of the checkpoint taken after the ``step``-th tool result."""
    # Filtered in SQL: walking get_state_history would decode every checkpoint.
    async for item in saver.alist(thread, filter={"step": 2 * step}, limit=1):
        return item.config
    raise RuntimeError(f"no checkpoint for step {step}")


async def run(name: str, steps: int, workdir: Path) -> dict[str, Any]:
    db = workdir / f"{name.rsplit(maxsplit=1)[-1].lower()}.db"
    thread: Any = {"configurable": {"thread_id": "long"}, "recursion_limit": 4 * steps + 10}
    async with open_checkpointer(f"sqlite:///{db}") as saver:
        if name == "tether":
            graph = tether_agent(steps, saver)
        else:
            state = DefaultState if name.endswith("add_messages") else DeltaState
            graph = langgraph_agent(state, steps, saver)
        started = time.perf_counter()
        result = await graph.ainvoke({"messages": [HumanMessage("read the report")]}, thread)
        elapsed = time.perf_counter() - started
        assert result["messages"][-1].content == f"read {steps} pages", result["messages"][-1]
        early = await _get_state_ms(graph, await _config_at_step(saver, thread, 10))
        late = await _get_state_ms(graph, await _config_at_step(saver, thread, steps))
    total = await stored_bytes(db)
    return {
        "name": name,
        "bytes": total,
        "per_step": total / steps,
        "early_ms": early,
        "late_ms": late,
        "ratio": late / early,
        "seconds": elapsed,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            await run(name, args.steps, Path(tmp))
            for name in ("langgraph add_messages", "langgraph DeltaChannel", "tether")
        ]
    print(f"{args.steps} steps, ~{RESULT_BYTES} B per tool result, SQLite, durability=async")
    print(
        f"{'variant':<24}{'total bytes':>14}{'bytes/step':>12}{'get_state@10':>14}"
        f"{'@last':>10}{'ratio':>8}{'run s':>8}"
    )
    for r in rows:
        print(
            f"{r['name']:<24}{r['bytes']:>14,}{r['per_step']:>12,.0f}{r['early_ms']:>12.2f}ms"
            f"{r['late_ms']:>8.2f}ms{r['ratio']:>8.2f}{r['seconds']:>8.1f}"
        )
    default, delta, ours = rows
    print(f"tether vs DeltaChannel bytes: {ours['bytes'] / delta['bytes']:.2f}x (goal <= 1.00)")
    print(f"default vs tether bytes: {default['bytes'] / ours['bytes']:.1f}x smaller (goal >= 40)")
    print(f"tether get_state ratio @last/@10: {ours['ratio']:.2f} (goal <= 1.5)")


if __name__ == "__main__":
    asyncio.run(main())
