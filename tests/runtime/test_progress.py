"""``unfinished``: a run killed between a step's writes and its checkpoint is not finished.

The state is produced for real: a child process runs the graph on the backend
under test and SIGKILLs itself right after ``aput_writes`` returned and before
the next ``aput`` (the crash harness's ``checkpoint.put_writes.after`` point).
LangGraph's ``get_state`` then says ``next == ()``, as for a finished run;
``unfinished`` says the truth, and resuming finishes the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from tests.backends import Backend
from tests.runtime.progress_child import CONFIG, INPUT, State, build
from tether import aunfinished, open_checkpointer_sync, unfinished
from tether.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _child(
    backend: Backend, action: str, workdir: Path, crash_at: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_CRASH")}
    if crash_at:
        env["TETHER_CRASH_AT"] = crash_at
    return subprocess.run(
        [
            sys.executable, "-m", "tests.runtime.progress_child",
            backend.url, json.dumps(backend.options), action, str(workdir),
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _killed(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr[-3000:]


def _effects(workdir: Path) -> list[str]:
    return (workdir / "effects").read_text().split()


async def test_a_run_killed_after_a_steps_writes_is_unfinished_though_next_is_empty(
    durable_backend: Backend, tmp_path: Path
) -> None:
    # Boundary 1 is the __start__ task's writes; 2 is node "a"'s.
    _killed(_child(durable_backend, "start", tmp_path, "checkpoint.put_writes.after:2"))
    assert _effects(tmp_path) == ["a"]
    async with durable_backend.open() as saver:
        graph = build(saver, tmp_path)
        state = await graph.aget_state(CONFIG)
        assert state.next == ()  # the trap: it looks finished...
        assert [t.name for t in state.tasks] == ["a"]
        assert await aunfinished(graph, CONFIG)  # ...but b and c have not run
        result = await graph.ainvoke(None, CONFIG)
        assert result["log"] == ["in", "a", "b", "c"]
        assert not await aunfinished(graph, CONFIG)
    assert _effects(tmp_path) == ["a", "b", "c"]  # "a" was not run again


async def test_a_command_killed_after_its_writes_is_unfinished_though_no_task_is_listed(
    durable_backend: Backend, tmp_path: Path
) -> None:
    assert _child(durable_backend, "start", tmp_path).returncode == 0
    # Boundary 1 of this process: the Command's own writes (goto b), on the finished checkpoint.
    _killed(_child(durable_backend, "goto", tmp_path, "checkpoint.put_writes.after:1"))
    async with durable_backend.open() as saver:
        graph = build(saver, tmp_path)
        state = await graph.aget_state(CONFIG)
        assert (state.next, state.tasks) == ((), ())
        assert await aunfinished(graph, CONFIG)
        result = await graph.ainvoke(None, CONFIG)
        assert result["log"] == ["in", "a", "b", "c", "b", "c"]
        assert not await aunfinished(graph, CONFIG)


def test_the_sync_check_sees_the_same(tmp_path: Path) -> None:
    backend = Backend("sqlite", f"sqlite:///{tmp_path / 'sync.db'}")
    _killed(_child(backend, "start", tmp_path, "checkpoint.put_writes.after:3"))
    with open_checkpointer_sync(backend.url) as saver:
        graph = build(saver, tmp_path)
        assert graph.get_state(CONFIG).next == ()
        assert unfinished(graph, CONFIG)
        assert graph.invoke(None, CONFIG)["log"] == ["in", "a", "b", "c"]
        assert not unfinished(graph, CONFIG)


async def test_finished_paused_new_and_updated_threads(tmp_path: Path) -> None:
    graph = build(InMemorySaver(), tmp_path)
    assert not await aunfinished(graph, CONFIG)  # no checkpoint: nothing to resume
    await graph.ainvoke(INPUT, CONFIG)
    assert not await aunfinished(graph, CONFIG)
    # A stored update that triggers no node leaves the run finished.
    await graph.ainvoke(Command(update={"log": ["note"]}), CONFIG)
    assert not await aunfinished(graph, CONFIG)

    def ask(state: State) -> dict[str, Any]:
        return {"log": [interrupt("ok?")]}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    paused = builder.compile(checkpointer=InMemorySaver())
    await paused.ainvoke(INPUT, CONFIG)
    assert await aunfinished(paused, CONFIG)  # waiting on a person is not finished
    await paused.ainvoke(Command(resume="yes"), CONFIG)
    assert not await aunfinished(paused, CONFIG)


def test_bad_arguments_name_the_problem(tmp_path: Path) -> None:
    graph = build(InMemorySaver(), tmp_path)
    with pytest.raises(ConfigurationError, match="thread_id"):
        unfinished(graph, {"configurable": {}})
    with pytest.raises(ConfigurationError, match="compiled graph"):
        unfinished(object(), CONFIG)
    with pytest.raises(ConfigurationError, match="checkpoint_ns"):
        unfinished(graph, {"configurable": {"thread_id": "t", "checkpoint_ns": "a:1"}})
    bare = StateGraph(State)
    bare.add_node("a", lambda s: {"log": ["a"]})
    bare.add_edge(START, "a")
    with pytest.raises(ConfigurationError, match="checkpointer"):
        unfinished(bare.compile(), CONFIG)
