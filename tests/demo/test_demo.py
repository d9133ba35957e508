"""``tether demo`` end to end: a fresh folder, no servers, one command, exit code 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.extras import DATABASES, SERVER, run_without

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _demo(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "tether", "demo"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_demo_runs_from_an_empty_folder(tmp_path: Path) -> None:
    done = _demo(tmp_path)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert (tmp_path / ".tether" / "demo" / "demo.db").exists()
    # 1: the run pauses at the refund approval and the request is shown.
    approval_id = re.search(r"paused: the run waits on approval (apr_\w+)", out)
    assert approval_id is not None, out
    assert f"Approval {approval_id.group(1)}  [pending]" in out
    assert "action        issue_refund" in out
    assert "amount_cents: 4200" in out
    assert "who decides   users: dana; roles: support-lead" in out
    # 2: another OS process edits the amount and resumes the run.
    first_pid = re.search(r"Process (\d+) runs the agent", out)
    other_pid = re.search(r"the run resumed in process (\d+)", out)
    assert first_pid is not None
    assert other_pid is not None
    assert first_pid.group(1) != other_pid.group(1)
    assert f"edit recorded for {approval_id.group(1)} by dana" in out
    # 3: the log shows the decision, the edit reached the agent, nothing was asked twice.
    assert "approval decided (edit)" in out
    assert "amount_cents: 4200 -> 2500" in out
    assert "model calls: 4 for 4 distinct prompts" in out
    assert "model steps in the log: 4" in out
    assert "refunds issued: 1; emails sent: 1" in out
    assert "Done: refund re_000001 of 2500 cents issued" in out
    assert out.rstrip().endswith("done.")


def test_demo_starts_fresh_each_run(tmp_path: Path) -> None:
    assert _demo(tmp_path).returncode == 0
    again = _demo(tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "refunds issued: 1; emails sent: 1" in again.stdout


def test_demo_needs_no_optional_extra(tmp_path: Path) -> None:
    """It did: the CLI imported PostgreSQL's driver at start-up, and the README's first
    command failed with ModuleNotFoundError: psycopg."""
    blocked = (*DATABASES, *SERVER)
    probe = run_without(blocked, tmp_path, "-c", "import psycopg")
    assert "No module named 'psycopg'" in probe.stderr  # the modules are missing there
    done = run_without(blocked, tmp_path, "-m", "tether", "demo")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "refunds issued: 1; emails sent: 1" in done.stdout
    assert done.stdout.rstrip().endswith("done.")
    serve = run_without(blocked, tmp_path, "-m", "tether", "serve", "--no-auth")
    assert serve.returncode == 2
    assert "tether serve needs the server extra (uvicorn is missing)" in serve.stderr
    assert "Traceback" not in serve.stderr
