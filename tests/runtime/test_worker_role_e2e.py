"""A ``tether worker`` connected as a run-scoped role (``tether workers grant``) runs a graph.

The administrator migrates and grants once; the worker process opens the run
store and the checkpoints with the role's URL (no DDL), takes a graph through
an interrupt, a resume and an approval to success, and leaves the scheduler to
an unrestricted worker.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg

from tests.runtime.roles import role_url
from tests.runtime.stored import thread_values
from tests.runtime.workers import PROJECT, Workers
from tether.approvals import get_approval
from tether.runtime.api import Runtime
from tether.runtime.project import Project


def _tether(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", *args], capture_output=True, text=True, check=False
    )


@asynccontextmanager
async def _role_worker(
    admin_url: str, role: str, tmp_path: Path, **start: Any
) -> AsyncIterator[Runtime]:
    """Grant ``role``, start one ``tether worker`` as it, and yield the administrator's runtime.

    On exit, the worker's log must show no refusal and no traceback.
    """
    granted = _tether("workers", "grant", role, "--url", admin_url)
    assert granted.returncode == 0, granted.stderr
    workdir = tmp_path / "world"
    workdir.mkdir()
    workers = Workers(role_url(admin_url, role), workdir)
    try:
        workers.start(1, **start)
        async with Runtime(admin_url, graphs=Project.load(PROJECT).graph_ids) as runtime:
            yield runtime
        log = workers.logs[0].read_text()
        assert "not campaigning for the scheduler" in log
        for trouble in ("permission denied", "names no run", "Traceback"):
            assert trouble not in log, log
    finally:
        workers.stop_all()


def test_the_grant_command_is_idempotent_and_refuses_a_bad_name(admin_url: str, role: str) -> None:
    first = _tether("workers", "grant", role, "--url", admin_url)
    assert first.returncode == 0, first.stderr
    assert f"worker role {role!r} created and granted" in first.stdout
    second = _tether("workers", "grant", role, "--url", admin_url)
    assert second.returncode == 0, second.stderr
    assert "granted again" in second.stdout
    bad = _tether("workers", "grant", "Robert'); DROP TABLE runs;--", "--url", admin_url)
    assert bad.returncode == 1
    assert "bad worker role name" in bad.stderr
    unset = _tether("workers", "grant", role, "--url", admin_url, "--password-env", "NOPE_X")
    assert unset.returncode == 2
    assert "NOPE_X: that variable is not set" in unset.stderr
    with psycopg.connect(admin_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_policies WHERE tablename = 'checkpoints'"
        ).fetchone()
    assert row == (5,)


async def test_a_worker_running_as_the_role_takes_a_run_through_an_interrupt_to_success(
    admin_url: str, role: str, tmp_path: Path
) -> None:
    async with _role_worker(
        admin_url, role, tmp_path, extra_args=["--checkpoints-url", role_url(admin_url, role)]
    ) as runtime:
        run = await runtime.create("pause", thread_id="t-scoped", input={"n": 2})
        first = await runtime.wait(run.run_id, timeout=60)
        assert first.status == "interrupted", first
        await runtime.resume(run.run_id, {"resume": "yes"})
        waiting = await runtime.wait(run.run_id, timeout=60)
        assert waiting.status == "interrupted", waiting
        approval_id = waiting.waiting_on[0].approval_id
        assert approval_id is not None
        shown = await get_approval(await runtime.checkpointer(), approval_id)
        await runtime.decide(
            "t-scoped", approval_id, "approve", by="dana", args_sha256=shown.request.args_sha256
        )
        done = await runtime.wait(run.run_id, timeout=60)
        assert done.status == "success", done
        assert (await thread_values(admin_url, "t-scoped"))["trace"][-1] == "after"


async def test_a_rollback_cancel_as_the_role_removes_the_runs_checkpoints(
    admin_url: str, role: str, tmp_path: Path
) -> None:
    async with _role_worker(
        admin_url, role, tmp_path, extra_env={"TETHER_LOOP_N": "200"}
    ) as runtime:
        run = await runtime.create("loop_n", thread_id="t-undo", input={"n": 0})
        async for event in runtime.follow(run.run_id):
            if event.kind == "node.finished":
                break
        await runtime.cancel(run.run_id, action="rollback", reason="undo")
        done = await runtime.wait(run.run_id, timeout=60)
        assert done.status == "cancelled", done
        saver = await runtime.checkpointer()
        assert await saver.aget_tuple({"configurable": {"thread_id": "t-undo"}}) is None
