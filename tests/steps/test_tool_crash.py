"""A tool killed between its effect and its commit: what the resumed run does.

The key's stability is checked on every durable backend; the other outcomes
depend only on the record store's semantics (covered per backend in
tests/store), so they run on SQLite to keep the suite fast.

The tool's effect is a line in a file (the outside world); the process
SIGKILLs itself right after it, before tether can commit the result.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.backends import Backend
from tests.steps.conftest import ChildRunner, lines, output

pytestmark = pytest.mark.slow


def _crash_once(run_child: ChildRunner, scenario: str, backend: Backend, work: Path) -> None:
    crashed = run_child(scenario, backend)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert len(lines(work / "effects")) == 1


async def test_keyed_tool_gets_the_same_key_in_the_next_process(
    durable_backend: Backend, run_child: ChildRunner, tmp_path: Path
) -> None:
    _crash_once(run_child, "tool:keyed", durable_backend, tmp_path)
    assert output(run_child("tool:keyed", durable_backend)) == {"last": "refunded A1"}
    effects = lines(tmp_path / "effects")
    assert len(effects) == 2  # the tool ran again, so the outside system can dedupe...
    first_key, second_key = (line.split(" ")[1] for line in effects)
    assert first_key == second_key  # ...on the same key
    assert first_key.startswith("tether-")


async def test_reconcile_reads_the_effect_back_instead_of_running_again(
    sqlite_backend: Backend, run_child: ChildRunner, tmp_path: Path
) -> None:
    _crash_once(run_child, "tool:reconciled", sqlite_backend, tmp_path)
    assert output(run_child("tool:reconciled", sqlite_backend)) == {"last": "refunded A1 (found)"}
    assert len(lines(tmp_path / "effects")) == 1  # not run twice
    assert len(lines(tmp_path / "reconciled")) == 1


async def test_reconcile_finding_nothing_runs_the_tool(
    sqlite_backend: Backend, run_child: ChildRunner, tmp_path: Path
) -> None:
    crashed = run_child("tool:reconciled", sqlite_backend, crash_at="tool.before:1")
    assert crashed.returncode == -signal.SIGKILL
    assert lines(tmp_path / "effects") == []
    (tmp_path / "crashed").write_text("1")  # the next run's effect does not kill itself
    assert output(run_child("tool:reconciled", sqlite_backend)) == {"last": "refunded A1"}
    assert len(lines(tmp_path / "reconciled")) == 1
    assert len(lines(tmp_path / "effects")) == 1


async def test_tool_without_key_or_reconcile_refuses_to_guess(
    sqlite_backend: Backend, run_child: ChildRunner, tmp_path: Path
) -> None:
    _crash_once(run_child, "tool:bare", sqlite_backend, tmp_path)
    refused = output(run_child("tool:bare", sqlite_backend))
    assert refused["error"] == "ToolOutcomeUnknownError"
    assert "outcome is unknown" in refused["message"]
    assert "idempotency_key" in refused["message"]
    assert len(lines(tmp_path / "effects")) == 1


@pytest.mark.parametrize("variant", ["safe", "read"])
async def test_safe_to_retry_tool_runs_again(
    sqlite_backend: Backend, run_child: ChildRunner, tmp_path: Path, variant: str
) -> None:
    """``safe_to_retry=True``, or ``read_only=True`` (which implies it)."""
    _crash_once(run_child, f"tool:{variant}", sqlite_backend, tmp_path)
    assert output(run_child(f"tool:{variant}", sqlite_backend)) == {"last": "refunded A1"}
    assert len(lines(tmp_path / "effects")) == 2
