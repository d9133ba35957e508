"""``tether crashtest mytarget:crash_target`` from the folder holding ``mytarget.py``.

docs/crashtest.md: the module is imported with the current directory first on
``sys.path``. The ``tether`` script (unlike ``python -m tether``) does not put the
current directory there, so the command runs as a user types it: the installed
script, from the target's folder, with no ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.crashtest.conftest import SUMMARY

TETHER = Path(sysconfig.get_path("scripts")) / "tether"
pytestmark = pytest.mark.slow

# The smallest target: one node, no model, no effects; a handful of boundaries.
TARGET = """\
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from tether.crashtest import CrashTarget


class State(TypedDict):
    n: int


def build(checkpointer, workdir):
    graph = StateGraph(State)
    graph.add_node("step", lambda state: {"n": state["n"] + 1})
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=checkpointer)


def crash_target():
    return CrashTarget(build=build, input={"n": 1})
"""


def test_a_target_module_in_the_current_directory_is_found(tmp_path: Path) -> None:
    assert TETHER.exists(), f"the tether script is not installed at {TETHER}"
    (tmp_path / "mytarget.py").write_text(TARGET, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(TETHER), "crashtest", "mytarget:crash_target", "--url",
         f"sqlite:///{tmp_path / 'crash.db'}", "--workers", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert "cannot import module 'mytarget'" not in done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    summary = SUMMARY.search(done.stdout)
    assert summary is not None, done.stdout
    assert int(summary["kills"]) == int(summary["boundaries"]) > 0
    assert int(summary["state_mismatches"]) == 0
