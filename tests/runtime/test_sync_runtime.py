"""``SyncRuntime``: the same control plane from sync code, against real workers."""

from __future__ import annotations

import pytest

from tests.runtime.workers import PROJECT, Workers
from tether.runtime import RunNotFoundError, SyncRuntime
from tether.runtime.project import Project


def test_sync_calls_create_wait_follow_and_cancel_runs(runtime_url: str, workers: Workers) -> None:
    workers.start(1)
    with SyncRuntime(runtime_url, graphs=Project.load(PROJECT).graph_ids) as rt:
        run = rt.create("three_node", thread_id="sync-1", input={"trace": []})
        assert run.status == "pending"
        done = rt.wait(run.run_id, timeout=60)
        assert done.status == "success"
        kinds = [e.kind for e in rt.follow(run.run_id)]
        assert kinds[:2] == ["run.created", "run.started"]
        assert kinds[-1] == "run.finished"
        assert [e.kind for e in rt.events(run.run_id)] == kinds
        assert [r.run_id for r in rt.list(thread_id="sync-1")] == [run.run_id]
        assert rt.get_thread("sync-1").status == "idle"

        paused = rt.create("pause", thread_id="sync-2", input={"trace": []})
        assert rt.wait(paused.run_id, timeout=60).status == "interrupted"
        cancelled = rt.cancel(paused.run_id, reason="not needed")
        assert cancelled.status == "cancelled"

        with pytest.raises(RunNotFoundError):
            rt.get("no-such-run")
        rt.delete_thread("sync-1")
        with pytest.raises(RunNotFoundError):
            rt.get(run.run_id)
        assert rt.delete_temporary_threads(grace=0) == []
        # Another tenant sees none of it.
        other = rt.scoped("globex")
        assert other.list() == []
        with pytest.raises(RunNotFoundError):
            other.get(run.run_id)
        with pytest.raises(RuntimeError, match="opened and closed by the one it came from"):
            other.open()


def test_a_follow_abandoned_early_leaves_the_runtime_usable(
    runtime_url: str, workers: Workers
) -> None:
    workers.start(1)
    with SyncRuntime(runtime_url, graphs=Project.load(PROJECT).graph_ids) as rt:
        run = rt.create("three_node", thread_id="sync-3", input={"trace": []})
        events = rt.follow(run.run_id)
        assert next(events).kind == "run.created"
        events.close()
        assert rt.wait(run.run_id, timeout=60).status == "success"


def test_a_closed_or_reopened_sync_runtime_says_so(runtime_url: str) -> None:
    rt = SyncRuntime(runtime_url)
    with pytest.raises(RuntimeError, match="not open"):
        rt.get("any")
    with rt, pytest.raises(RuntimeError, match="already open"):
        rt.open()
    with pytest.raises(RuntimeError, match="not open"):
        rt.list()
