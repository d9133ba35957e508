"""Across processes: a run pauses here, a decision made in another OS process resumes it.

Nothing is held in between: this process closes its checkpointer before the
deciding process starts, and reads the outcome back afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from tests.approvals import graphs
from tests.backends import Backend
from tether import open_checkpointer_sync
from tether.approvals import get_approval_sync, list_approvals_sync
from tether.store import store_for

ROOT = Path(__file__).resolve().parents[2]
GRAPH = "tests.approvals.graphs:gate_graph"
CONFIG: RunnableConfig = {"configurable": {"thread_id": "t1"}}
pytestmark = pytest.mark.slow


def _cli(backend: Backend, *argv: str) -> list[str]:
    command = [sys.executable, "-m", "tether", "approvals", *argv, "--url", backend.url]
    if backend.key_prefix:
        command += ["--key-prefix", backend.key_prefix]
    return command


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _pause(backend: Backend) -> tuple[str, str, int]:
    with open_checkpointer_sync(backend.url, **backend.options) as saver:
        graphs.gate_graph(saver).invoke({"amount": 300, "log": []}, CONFIG)
        (view,) = list_approvals_sync(saver)
    return view.request.approval_id, view.request.args_sha256, os.getpid()


def _outcome(backend: Backend, approval_id: str) -> tuple[list[str], str, list[dict[str, Any]]]:
    with open_checkpointer_sync(backend.url, **backend.options) as saver:
        log = graphs.gate_graph(saver).get_state(CONFIG).values["log"]
        status = get_approval_sync(saver, approval_id).status
        steps = store_for(saver).sync.steps("t1")
    return log, status, steps


def test_a_decision_in_another_process_resumes_the_run(durable_backend: Backend) -> None:
    approval_id, sha, pid = _pause(durable_backend)
    shown = subprocess.run(
        _cli(durable_backend, "show", approval_id),
        env=_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"arguments     sha256 {sha}" in shown.stdout
    done = subprocess.run(
        _cli(durable_backend, "approve", approval_id, "--graph", GRAPH, "--by", "alice",
             "--args-sha256", sha),
        env=_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "the run finished" in done.stdout
    assert f"resumed in process {pid}" not in done.stdout
    log, status, steps = _outcome(durable_backend, approval_id)
    assert log == ["paid 300 to bob (approve)", "after"]
    assert status == "approved"
    events = [(s["output"]["event"], s["worker_id"].rsplit(":", 1)[1]) for s in steps]
    assert [e for e, _ in events] == ["requested", "decided", "cleared"]
    assert events[0][1] == str(pid)
    assert events[1][1] != str(pid)  # decided in the other process


def test_two_processes_deciding_at_once_resume_exactly_once(durable_backend: Backend) -> None:
    approval_id, sha, _ = _pause(durable_backend)
    deciders = [("alice", []), ("erin", ["--role", "finance"])]
    running = [
        subprocess.Popen(
            _cli(
                durable_backend,
                "approve",
                approval_id,
                "--graph",
                GRAPH,
                "--by",
                who,
                *roles,
                "--args-sha256",
                sha,
            ),
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who, roles in deciders
    ]
    results = [(p.wait(timeout=120), *p.communicate()) for p in running]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 1], results
    loser = next(err for code, _, err in results if code == 1)
    assert "decided" in loser
    log, status, steps = _outcome(durable_backend, approval_id)
    assert log == ["paid 300 to bob (approve)", "after"]
    assert status == "approved"
    assert [s["output"]["event"] for s in steps].count("decided") == 1
