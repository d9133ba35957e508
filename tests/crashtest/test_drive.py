"""The harness's resume loop goes on while the run is unfinished, not while ``next`` is set."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends import Backend
from tests.runtime.progress_child import CONFIG, INPUT, build
from tests.runtime.test_progress import _child, _effects, _killed
from tether import aunfinished
from tether.crashtest import CrashTarget
from tether.crashtest._child import drive

pytestmark = pytest.mark.slow


async def test_drive_finishes_a_thread_whose_stored_writes_list_no_task(tmp_path: Path) -> None:
    backend = Backend("sqlite", f"sqlite:///{tmp_path / 'drive.db'}")
    assert _child(backend, "start", tmp_path).returncode == 0
    # A Command(goto="b") killed once its writes are stored: no task is listed.
    _killed(_child(backend, "goto", tmp_path, "checkpoint.put_writes.after:1"))
    target = CrashTarget(build=build, input=INPUT)
    async with backend.open() as saver:
        graph = build(saver, tmp_path)
        assert (await graph.aget_state(CONFIG)).tasks == ()
        await drive(graph, target, CONFIG)
        assert (await graph.aget_state(CONFIG)).values["log"] == ["in", "a", "b", "c", "b", "c"]
        assert not await aunfinished(graph, CONFIG)
    assert _effects(tmp_path)[-2:] == ["b", "c"]  # (the killed process may have started "b")
