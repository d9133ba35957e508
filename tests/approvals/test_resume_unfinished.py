"""``tether approvals resume`` finishes a run killed after the approved step's writes.

A deciding process stores the decision, resumes the run, and is SIGKILLed right
after the approved step's writes are stored and before the next checkpoint is.
LangGraph's ``get_state`` then shows no pending interrupt and ``next == ()``:
the run looks finished, and only ``after`` is missing. ``tether approvals
resume`` must finish it, not report that the run is no longer paused.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.approvals import graphs
from tests.approvals.test_cross_process import CONFIG, GRAPH, ROOT, _cli, _env, _pause
from tests.backends import Backend
from tether import open_checkpointer_sync, unfinished

pytestmark = pytest.mark.slow


def _decide_and_die(backend: Backend, approval_id: str, sha: str, crash_at: str) -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "tests.approvals.decide_child",
            backend.url, json.dumps(backend.options), approval_id, sha,
        ],
        cwd=ROOT, env={**_env(), "TETHER_CRASH_AT": crash_at},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr[-3000:]


def test_resume_finishes_a_run_killed_after_the_approved_step(durable_backend: Backend) -> None:
    approval_id, sha, _ = _pause(durable_backend)
    # A resume map is not stored as writes of its own, so the deciding process's
    # first put_writes is the approved "pay" step's.
    _decide_and_die(durable_backend, approval_id, sha, "checkpoint.put_writes.after:1")
    with open_checkpointer_sync(durable_backend.url, **durable_backend.options) as saver:
        graph = graphs.gate_graph(saver)
        state = graph.get_state(CONFIG)
        assert (state.next, state.interrupts) == ((), ())  # looks finished
        assert state.values["log"] == ["paid 300 to bob (approve)"]
        assert unfinished(graph, CONFIG)

    resumed = subprocess.run(
        _cli(durable_backend, "resume", approval_id, "--graph", GRAPH),
        env=_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "the run finished" in resumed.stdout
    with open_checkpointer_sync(durable_backend.url, **durable_backend.options) as saver:
        graph = graphs.gate_graph(saver)
        assert graph.get_state(CONFIG).values["log"] == ["paid 300 to bob (approve)", "after"]
        assert not unfinished(graph, CONFIG)
