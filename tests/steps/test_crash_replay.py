"""Done means: after a kill in mid-node, a fresh process replays the model's answer."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.backends import Backend
from tests.steps.conftest import ChildRunner, lines, output
from tether import open_checkpointer
from tether.steps import read_steps

pytestmark = pytest.mark.slow


async def test_model_is_not_asked_again_after_a_kill_in_mid_node(
    durable_backend: Backend, run_child: ChildRunner, tmp_path: Path
) -> None:
    crashed = run_child("model", durable_backend, crash_at="model.after:1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert len(lines(tmp_path / "model_calls")) == 1
    assert lines(tmp_path / "after_model") == []  # the node never finished

    resumed = output(run_child("model", durable_backend))
    assert resumed == {"last": "the answer"}
    assert len(lines(tmp_path / "model_calls")) == 1  # replayed, not asked again
    assert lines(tmp_path / "after_model") == ["reached"]

    async with open_checkpointer(durable_backend.url, **durable_backend.options) as saver:
        steps = await read_steps(saver, "t1")
    assert [(s.kind, s.node) for s in steps] == [("model", "think")]
    assert steps[0].output.content == "the answer"


async def test_kill_before_the_model_answers_asks_it_on_resume(
    durable_backend: Backend, run_child: ChildRunner, tmp_path: Path
) -> None:
    crashed = run_child("model", durable_backend, crash_at="model.before:1")
    assert crashed.returncode == -signal.SIGKILL
    assert lines(tmp_path / "model_calls") == []
    assert output(run_child("model", durable_backend)) == {"last": "the answer"}
    assert len(lines(tmp_path / "model_calls")) == 1
