"""Behaviour beyond conformance, on every backend: cross-process resume, time travel, deletion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from langgraph.types import Command

from tests.backends import Backend
from tests.checkpointing.gate_graph import build
from tests.raw_storage import raw_dump

ROOT = Path(__file__).resolve().parents[2]


def _resume_in_child(backend: Backend, thread_id: str, value: str) -> dict[str, object]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.checkpointing.gate_graph",
            backend.url,
            json.dumps(backend.options),
            thread_id,
            value,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def test_interrupt_then_resume(backend: Backend) -> None:
    """Pause at interrupt(); a separate OS process resumes with Command(resume=...).

    memory:// lives inside one process by definition, so there the resume runs on
    a freshly compiled graph in this process instead.
    """
    config = {"configurable": {"thread_id": "gate-1"}}
    async with backend.open() as saver:
        graph = build(saver)
        paused = await graph.ainvoke({"items": []}, config)
        assert paused["__interrupt__"][0].value == {"question": "approve?", "items": ["proposal-0"]}
        state = await graph.aget_state(config)
        assert state.next == ("gate",)
        if backend.name == "memory":
            final = await build(saver).ainvoke(Command(resume="yes"), config)
        else:
            final = _resume_in_child(backend, "gate-1", "yes")
        assert final["items"] == ["proposal-0", "done:yes"]
        assert final["decision"] == "yes"
        after = await graph.aget_state(config)
        assert after.next == ()
        assert after.values["decision"] == "yes"


async def test_history_and_fork(backend: Backend) -> None:
    config = {"configurable": {"thread_id": "travel"}}
    async with backend.open() as saver:
        graph = build(saver)
        await graph.ainvoke({"items": []}, config)
        await graph.ainvoke(Command(resume="first"), config)
        history = [s async for s in graph.aget_state_history(config)]
        # newest first: finish, gate (resumed), gate (paused), propose, input
        assert history[0].values.get("decision") == "first"
        paused = next(s for s in history if s.next == ("gate",))

        # Fork: edit the state as of the paused checkpoint, then run the new branch.
        fork_config = await graph.aupdate_state(paused.config, {"items": ["edited"]})
        assert (
            fork_config["configurable"]["checkpoint_id"]
            != paused.config["configurable"]["checkpoint_id"]
        )
        again = await graph.ainvoke(None, fork_config)
        assert again["__interrupt__"][0].value["items"] == ["proposal-0", "edited"]
        forked = await graph.ainvoke(Command(resume="second"), config)
        assert forked["items"] == ["proposal-0", "edited", "done:second"]
        latest = await graph.aget_state(config)
        assert latest.values["decision"] == "second"
        fork_parent = await graph.aget_state(fork_config)
        assert fork_parent.parent_config is not None
        assert (
            fork_parent.parent_config["configurable"]["checkpoint_id"]
            == paused.config["configurable"]["checkpoint_id"]
        )
        # The original branch is still in history, untouched.
        original = await graph.aget_state(history[0].config)
        assert original.values["decision"] == "first"
        assert original.values["items"] == ["proposal-0", "done:first"]


async def test_delete_thread_leaves_nothing_behind(backend: Backend) -> None:
    async with backend.open() as saver:
        graph = build(saver)
        for thread in ("doomed-thread-x1", "kept-thread-y2"):
            config = {"configurable": {"thread_id": thread}}
            await graph.ainvoke({"items": []}, config)
            await graph.ainvoke(Command(resume="ok"), config)
        before = await raw_dump(backend, saver)
        assert any("doomed-thread-x1" in row for row in before), "the check must see the data"

        await saver.adelete_thread("doomed-thread-x1")

        after = await raw_dump(backend, saver)
        leftovers = [row for row in after if "doomed-thread-x1" in row]
        assert leftovers == []
        assert any("kept-thread-y2" in row for row in after)
        kept = await graph.aget_state({"configurable": {"thread_id": "kept-thread-y2"}})
        assert kept.values["decision"] == "ok"
