"""The process the crash harness starts: run or resume one target to completion.

``python -m tether.crashtest._child --target M:A --url URL --workdir DIR --result FILE``
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
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from tether._crashpoints import CRASH_AT_ENV, CRASH_TRACE_ENV
from tether._progress import aunfinished
from tether.checkpointing import open_checkpointer
from tether.compensation import CompensationReport, compensate
from tether.crashtest._saver import CrashPointSaver
from tether.crashtest._steplog import recorded_model_calls
from tether.crashtest._target import CrashTarget, CrashTestError, load_target

__all__ = ["ChildJob", "drive", "forked_entry", "main", "run_to_file"]

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
    # Not `snapshot.next`: it leaves out tasks whose writes are already saved,
    # and a thread killed right after saving them still has a step to finish.
    if not await aunfinished(graph, config):
        return _DONE
    snapshot = await graph.aget_state(config)
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
        compensation = await _drive_or_compensate(graph, target, config)
        snapshot = await graph.aget_state(config)
        state = target.normalize(snapshot.values)
        if compensation is None:
            completed = not await aunfinished(graph, config)
        else:
            completed = compensation.complete
            state = {"values": state, "compensation": _statuses(compensation)}
        return {
            "state": state,
            "completed": completed,
            "effects": dict(target.effects(workdir)) if target.effects else {},
            "recorded_model_calls_before": recorded_before,
            "pid": os.getpid(),
        }


async def _drive_or_compensate(
    graph: Any, target: CrashTarget, config: RunnableConfig
) -> CompensationReport | None:
    """Drive the thread; for a compensating target, compensate its failed run."""
    if not target.compensate:
        await drive(graph, target, config)
        return None
    try:
        await drive(graph, target, config)
    except Exception as exc:
        return await compensate(graph, config, reason=f"{type(exc).__name__}: {exc}")
    raise CrashTestError(
        f"the run of compensating target thread {target.thread_id!r} finished without "
        "failing; a target with compensate=True must fail so that it is compensated"
    )


def _statuses(report: CompensationReport) -> list[list[Any]]:
    """What is compared of a compensation: each effect's tool, step and status, in order."""
    return [[e.tool, e.step_index, e.status] for e in report.effects]


def run_to_file(spec: str, url: str, options: dict[str, Any], workdir: Path, result: Path) -> None:
    """Load the target, drive it to completion here, and write the outcome as JSON."""
    target = load_target(spec)
    outcome = asyncio.run(run_child(target, url, options, workdir))
    result.write_text(json.dumps(outcome, sort_keys=True), encoding="utf-8")


@dataclass(frozen=True)
class ChildJob:
    """One child run: which target, on which database, with which crash settings.

    Attributes:
        spec: The target's ``MODULE:ATTR``.
        url: The run's database.
        options: ``open_checkpointer`` options (a Redis key prefix).
        workdir: The run's outside world.
        result: Where the outcome JSON goes.
        env: Crash settings (``TETHER_CRASH_AT`` or ``TETHER_CRASH_TRACE``).
        log: Receives the child's stdout and stderr.
        search_path: Put first on ``sys.path`` so the target module is found.
    """

    spec: str
    url: str
    options: dict[str, Any]
    workdir: Path
    result: Path
    env: dict[str, str]
    log: Path
    search_path: str


def forked_entry(job: ChildJob) -> None:
    """Entry point of a child forked from the harness's preloaded fork server.

    The fork server has only imported tether and LangGraph; each child is a new
    process that opens its own connections, exactly like a new worker.
    """
    fd = os.open(job.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    for name in (CRASH_AT_ENV, CRASH_TRACE_ENV):
        os.environ.pop(name, None)
    os.environ.update(job.env)
    sys.path.insert(0, job.search_path)
    run_to_file(job.spec, job.url, job.options, job.workdir, job.result)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tether.crashtest._child")
    parser.add_argument("--target", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--result", required=True, type=Path)
    args = parser.parse_args(argv)
    run_to_file(args.target, args.url, json.loads(args.options), args.workdir, args.result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
