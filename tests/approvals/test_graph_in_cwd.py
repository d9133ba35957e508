"""``tether approvals … --graph myapp.graph:build`` from the project folder holding ``myapp``.

README "Approvals" and docs/approvals.md run the command from the project folder
with no ``PYTHONPATH``. The ``tether`` script (unlike ``python -m tether``) does not
put the current directory on ``sys.path``, so the commands run as a user types
them: the installed script, from the project folder, with no ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

TETHER = Path(sysconfig.get_path("scripts")) / "tether"
GRAPH = "myapp.graph:build"
pytestmark = pytest.mark.slow

# The project's graph: one action, gated by an approval.
MYAPP_GRAPH = """\
import operator
from datetime import timedelta
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from tether.approvals import Approvers, Stop, request_approval


class State(TypedDict, total=False):
    amount: int
    log: Annotated[list[str], operator.add]


def pay(state):
    outcome = request_approval(
        "pay", {"amount": state["amount"]}, why="invoice 42 is due",
        approvers=Approvers(users=["alice"]), expires_in=timedelta(hours=1), on_expiry=Stop(),
    )
    return {"log": [f"pay {outcome.decision}"]}


def build(checkpointer):
    graph = StateGraph(State)
    graph.add_node("pay", pay)
    graph.add_edge(START, "pay")
    graph.add_edge("pay", END)
    return graph.compile(checkpointer=checkpointer)
"""

# Pauses a run at the request (``python -c`` puts the current directory on sys.path).
PAUSE = """\
import json, sys
from tether import open_checkpointer_sync
from tether.approvals import list_approvals_sync
from myapp.graph import build

with open_checkpointer_sync(sys.argv[1]) as saver:
    build(saver).invoke({"amount": 300, "log": []}, {"configurable": {"thread_id": "t1"}})
    (view,) = list_approvals_sync(saver)
print(json.dumps([view.request.approval_id, view.request.args_sha256]))
"""


def _project(root: Path) -> Path:
    package = root / "myapp"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "graph.py").write_text(MYAPP_GRAPH, encoding="utf-8")
    return root


def _run(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "TETHER_GRAPH"}}
    return subprocess.run(
        list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_graph_module_in_the_current_directory_is_found(tmp_path: Path) -> None:
    assert TETHER.exists(), f"the tether script is not installed at {TETHER}"
    project = _project(tmp_path)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    paused = _run(project, sys.executable, "-c", PAUSE, url)
    assert paused.returncode == 0, paused.stderr
    approval_id, sha = json.loads(paused.stdout)

    expired = _run(project, str(TETHER), "approvals", "expire", "--url", url, "--graph", GRAPH)
    assert "No module named 'myapp'" not in expired.stderr
    assert expired.returncode == 0, expired.stderr
    assert "no expired approvals" in expired.stdout

    approved = _run(
        project, str(TETHER), "approvals", "approve", approval_id, "--url", url,
        "--graph", GRAPH, "--by", "alice", "--args-sha256", sha,
    )  # fmt: skip
    assert "No module named 'myapp'" not in approved.stderr
    assert approved.returncode == 0, approved.stderr
    assert f"approve recorded for {approval_id} by alice" in approved.stdout
    assert "the run finished" in approved.stdout
