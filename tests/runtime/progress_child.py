"""A child process for the progress tests: runs one small graph, maybe killed on the way.

Usage: ``python -m tests.runtime.progress_child <url> <options-json> <action> <workdir>``
with ``action`` one of ``start`` (run from the input) or ``goto`` (send
``Command(goto="b")`` to the thread). The parent sets ``TETHER_CRASH_AT`` to
SIGKILL it at a checkpoint boundary. Each node appends its name to the state's
``log`` and to ``<workdir>/effects``, so the parent sees which nodes ran.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from tether import open_checkpointer
from tether.crashtest import CrashPointSaver

CONFIG: RunnableConfig = {"configurable": {"thread_id": "progress"}}
INPUT = {"log": ["in"]}


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def build(checkpointer: BaseCheckpointSaver[Any], workdir: Path) -> Any:
    """START -> a -> b -> c -> END; each node logs itself."""

    def node(name: str) -> Any:
        def run(state: State) -> dict[str, Any]:
            with (workdir / "effects").open("a", encoding="utf-8") as out:
                out.write(name + "\n")
            return {"log": [name]}

        return run

    builder = StateGraph(State)
    for name in ("a", "b", "c"):
        builder.add_node(name, node(name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=checkpointer)


class WritesFirstSaver(CrashPointSaver):
    """Starts a checkpoint write only once the task writes already in flight are stored.

    LangGraph runs a task's ``aput_writes`` and the step's next ``aput``
    concurrently. On a fast server the checkpoint sometimes lands before the
    writes do, and a kill right after the writes then finds the checkpoint
    already saved. Holding the checkpoint back (a slow disk would do the same)
    makes ``checkpoint.put_writes.after:N`` fall in the window every time.
    """

    def __init__(self, inner: BaseCheckpointSaver[Any]) -> None:
        super().__init__(inner)
        self._writing = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._writing += 1
        self._idle.clear()
        try:
            await super().aput_writes(config, writes, task_id, task_path)
        finally:
            self._writing -= 1
            if not self._writing:
                self._idle.set()

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await self._idle.wait()
        return await super().aput(config, checkpoint, metadata, new_versions)


async def main(url: str, options: dict[str, Any], action: str, workdir: Path) -> None:
    async with open_checkpointer(url, **options) as saver:
        graph = build(WritesFirstSaver(saver), workdir)
        payload = INPUT if action == "start" else Command(goto="b")
        result = await graph.ainvoke(payload, CONFIG, durability="sync")
        print(json.dumps(result))


if __name__ == "__main__":
    url, options, action, workdir = sys.argv[1:5]
    asyncio.run(main(url, json.loads(options), action, Path(workdir)))
