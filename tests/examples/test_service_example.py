"""``examples/langgraph.json`` served by real ``tether worker`` processes on SQLite.

The first worker SIGKILLs itself right after the refund's result is recorded;
a second worker takes the run over once the lease expires and finishes it with
one refund issued and without asking the model again for what it answered.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tether.graphs import FakePaymentsProvider, read_calls
from tether.runtime import Runtime

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "langgraph.json"
pytestmark = pytest.mark.slow


def _worker(url: str, cwd: Path, name: str, **env: str) -> subprocess.Popen[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    log = (cwd / f"{name}.log").open("wb")
    command = [sys.executable, "-m", "tether", "worker", "--url", url, "--config", str(CONFIG)]
    return subprocess.Popen(
        [*command, "--worker-id", name, "--lease", "1"],
        cwd=cwd, env={**clean, **env}, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


async def test_a_killed_worker_s_run_of_the_example_finishes_on_another(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'service.db'}"
    first = _worker(url, tmp_path, "first", TETHER_CRASH_AT="tool.after:1")
    second = None
    try:
        async with Runtime(url, graphs=["support"]) as rt:
            run = await rt.create(
                "support",
                thread_id="ticket-42",
                input={"messages": [{"role": "user", "content": "Please refund order A-1001."}]},
            )
            assert first.wait(timeout=60) == -signal.SIGKILL
            assert FakePaymentsProvider(tmp_path / "payments.db").counts().refunds == 1
            second = _worker(url, tmp_path, "second")
            done = await rt.wait(run.run_id, timeout=60)
            assert done.status == "success", done
            assert done.fence == 2
            thread = await rt.get_thread("ticket-42")
            answer = thread.values["messages"][-1]["content"]
            assert answer == "Done: refund re_000001 of 4999 cents on A-1001."
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    counts = FakePaymentsProvider(tmp_path / "payments.db").counts()
    assert (counts.refund_attempts, counts.refunds) == (1, 1)
    calls = read_calls(tmp_path / "model_calls.log")
    assert [call.rule for call in calls] == ["refund", "confirm"]
    assert calls[0].pid == first.pid
    assert second is not None
    assert calls[1].pid == second.pid
