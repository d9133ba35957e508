"""The process the crash harness starts: run or resume one target to completion.

``python -m tether.crashtest.child --target M:A --url URL --workdir DIR --result FILE``
opens the checkpointer, wraps it in :class:`CrashPointSaver`, builds the graph,
and drives the thread until it is finished: from the input if the thread has
no checkpoint yet, otherwise from where the last process left it. Under
``TETHER_CRASH_AT`` it dies at the chosen boundary; otherwise it writes a JSON
result (final state, effect counts, recorded model calls) to ``--result``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from tether.checkpointing import open_checkpointer
from tether.crashtest.saver import CrashPointSaver
from tether.crashtest.steplog import recorded_model_calls
from tether.crashtest.target import CrashTarget, CrashTestError, load_target

__all__ = ["drive", "main"]

# More rounds than any graph needs; a thread still unfinished after this many
# invocations keeps stopping without an interrupt to answer.
_MAX_ROUNDS = 50


async def drive(graph: Any, target: CrashTarget, config: RunnableConfig) -> None:
    """Invoke ``graph`` on ``config``'s thread until it has nothing left to run.

    Raises:
        CrashTestError: The graph stops at an interrupt and the target has no
            ``answer``, or it never finishes.
    """
    payload: Any = target.input
    if await graph.checkpointer.aget_tuple(config) is not None:
        payload = await _next_payload(graph, target, config)
        if payload is _DONE:
            return
    for _ in range(_MAX_ROUNDS):
        await graph.ainvoke(payload, config, durability=target.durability)
        payload = await _next_payload(graph, target, config)
        if payload is _DONE:
            return
    raise CrashTestError(f"thread {target.thread_id!r} did not finish in {_MAX_ROUNDS} rounds")


_DONE = object()


async def _next_payload(graph: Any, target: CrashTarget, config: RunnableConfig) -> Any:
    snapshot = await graph.aget_state(config)
    # Not `snapshot.next`: it leaves out tasks whose writes are already saved,
    # and a thread killed right after saving them still has a step to finish.
    if not snapshot.tasks:
        return _DONE
    if not snapshot.interrupts:
        return None
    if target.answer is None:
        raise CrashTestError(
            f"the graph stopped at an interrupt ({snapshot.interrupts[0].value!r}) and the crash "
            "target has no 'answer'; give CrashTarget(answer=...) to resume it"
        )
    return Command(resume={i.id: target.answer(i.value) for i in snapshot.interrupts})


async def run_child(
    target: CrashTarget, url: str, options: dict[str, Any], workdir: Path
) -> dict[str, Any]:
    """Drive the target once in this process; returns what happened."""
    config: RunnableConfig = {"configurable": {"thread_id": target.thread_id}}
    async with open_checkpointer(url, **options) as saver:
        checkpointer = CrashPointSaver(saver)
        recorded_before = await recorded_model_calls(saver, target.thread_id)
        graph = target.build(checkpointer, workdir)
        await drive(graph, target, config)
        snapshot = await graph.aget_state(config)
        return {
            "state": target.normalize(snapshot.values),
            "completed": not snapshot.tasks,
            "effects": dict(target.effects(workdir)) if target.effects else {},
            "recorded_model_calls_before": recorded_before,
            "pid": os.getpid(),
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tether.crashtest.child")
    parser.add_argument("--target", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--result", required=True, type=Path)
    args = parser.parse_args(argv)
    target = load_target(args.target)
    outcome = asyncio.run(run_child(target, args.url, json.loads(args.options), args.workdir))
    args.result.write_text(json.dumps(outcome, sort_keys=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
