"""The runnable examples, run as real processes: killed mid-run, then resumed.

Each example is run from an empty folder, first killed (SIGKILL) at a crash
point, then again to resume the thread. The files it leaves behind prove what
happened: the fake payments provider counts every refund request, and the
scripted model logs every call it really made, with the process id.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tether.graphs import FakePaymentsProvider, read_calls

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
pytestmark = pytest.mark.slow


def _run(
    example: str, cwd: Path, *args: str, crash_at: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    if crash_at is not None:
        env["TETHER_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, str(EXAMPLES / example), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _resume(example: str, cwd: Path) -> str:
    done = _run(example, cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming thread ticket-42 where the last process died" in done.stdout
    assert "answer: Done: refund re_000001 of 4999 cents on A-1001." in done.stdout
    return done.stdout


def _assert_one_refund(cwd: Path, out: str) -> None:
    counts = FakePaymentsProvider(cwd / "payments.db").counts()
    assert (counts.refund_attempts, counts.refunds) == (1, 1)
    assert "refund requests: 1; refunds issued: 1" in out
    assert len(re.findall(r"step \d+: tool  refund_order", out)) == 1


EXAMPLE_FILES = ["adopt_create_agent.py", "tool_node_graph.py"]


@pytest.mark.parametrize("example", EXAMPLE_FILES)
def test_crash_after_the_refund_is_recorded_resumes_without_a_second_refund(
    example: str, tmp_path: Path
) -> None:
    crashed = _run(example, tmp_path, "--crash")
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    first = read_calls(tmp_path / "model_calls.log")
    assert [call.rule for call in first] == ["refund"]
    assert FakePaymentsProvider(tmp_path / "payments.db").counts().refunds == 1

    out = _resume(example, tmp_path)
    _assert_one_refund(tmp_path, out)
    # The resumed process asked the model once, for the final answer only.
    calls = read_calls(tmp_path / "model_calls.log")
    assert [call.rule for call in calls] == ["refund", "confirm"]
    assert calls[1].pid != calls[0].pid
    assert "model calls: 1 by this process, 2 in all" in out


@pytest.mark.parametrize("example", EXAMPLE_FILES)
def test_crash_after_the_model_answer_is_recorded_replays_it(example: str, tmp_path: Path) -> None:
    crashed = _run(example, tmp_path, crash_at="model.after:1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    killed_pid = read_calls(tmp_path / "model_calls.log")[0].pid

    out = _resume(example, tmp_path)
    _assert_one_refund(tmp_path, out)
    # The node that died is run again, but its recorded answer is replayed:
    # the killed process asked for the refund, the new one only confirmed.
    calls = read_calls(tmp_path / "model_calls.log")
    assert [(call.rule, call.pid == killed_pid) for call in calls] == [
        ("refund", True),
        ("confirm", False),
    ]


@pytest.mark.parametrize("example", EXAMPLE_FILES)
def test_a_finished_thread_is_reported_not_run_again(example: str, tmp_path: Path) -> None:
    done = _run(example, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    again = _run(example, tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "thread ticket-42 is finished" in again.stdout
    assert "model calls: 0 by this process, 2 in all" in again.stdout
    _assert_one_refund(tmp_path, again.stdout)


def test_a_run_killed_after_a_steps_writes_is_resumed_not_reported_finished(
    tmp_path: Path,
) -> None:
    # The tools step's writes are stored (boundary 3), its checkpoint is not:
    # LangGraph's get_state says next == (), as for a finished thread.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env.update(PYTHONPATH=str(ROOT), TETHER_CRASH_AT="checkpoint.put_writes.after:3")
    crashed = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "examples" / "writes_child.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    assert [call.rule for call in read_calls(tmp_path / "model_calls.log")] == ["refund"]

    out = _resume("tool_node_graph.py", tmp_path)
    _assert_one_refund(tmp_path, out)
    assert [call.rule for call in read_calls(tmp_path / "model_calls.log")] == [
        "refund",
        "confirm",
    ]


def test_compensate_refund_killed_mid_compensation_undoes_once(tmp_path: Path) -> None:
    killed = _run("compensate_refund.py", tmp_path, crash_at="compensation.before:1")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    done = _run("compensate_refund.py", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming thread ticket-7 where the last process died" in done.stdout
    assert "compensation issue_refund:undone (undoes step 3)" in done.stdout
    assert "send_email: not undone (compensation policy 'none')" in done.stdout
    assert "issue_refund: undone" in done.stdout
    counts = FakePaymentsProvider(tmp_path / "payments.db").counts()
    assert (counts.refunds, counts.reversals, counts.emails) == (1, 1, 2)
