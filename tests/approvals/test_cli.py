"""``tether approvals``: list, show, decide and expire from a shell; bad input fails clearly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig

from tests.approvals import graphs
from tether import open_checkpointer_sync
from tether.approvals import get_approval_sync
from tether.cli import main

GRAPH = "tests.approvals.graphs:gate_graph"


@dataclass
class Waiting:
    url: str
    approval_id: str
    args_sha256: str
    expires_at: str


@pytest.fixture
def waiting(tmp_path: Path) -> Waiting:
    """A run paused at an approval in a SQLite file; no process holds it."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    with open_checkpointer_sync(url) as saver:
        graph = graphs.gate_graph(saver)
        graph.invoke({"amount": 500, "log": []}, config)
        state = graph.get_state(config)
    payload = state.interrupts[0].value
    return Waiting(url, payload["approval_id"], payload["args_sha256"], payload["expires_at"])


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _status(w: Waiting) -> str:
    with open_checkpointer_sync(w.url) as saver:
        return get_approval_sync(saver, w.approval_id).status


def test_list_and_show(waiting: Waiting, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "approvals", "list", "--url", waiting.url)
    assert code == 0
    assert waiting.approval_id in out
    assert "pending" in out
    assert "thread=t1" in out
    code, out, _ = _run(capsys, "approvals", "list", "--url", waiting.url, "--thread", "nope")
    assert out.strip() == "no pending approvals in thread 'nope'"
    code, out, _ = _run(capsys, "approvals", "show", waiting.approval_id, "--url", waiting.url)
    assert code == 0
    for text in (
        "action        pay",
        "why           invoice 42 is due",
        "affects       the company account",
        "if denied     the invoice stays unpaid",
        f"arguments     sha256 {waiting.args_sha256}",
        '"amount": 500,',
        '"balance_cents": 100',
        "depends on    balance@1",
        "who decides   users: alice; roles: finance",
        "on expiry     stop the run (partial result) (a timeout never approves)",
        "alternative   pay",
        f"--args-sha256 {waiting.args_sha256}",
    ):
        assert text in out, text


def test_approve_resumes_the_run(waiting: Waiting, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys, "approvals", "approve", waiting.approval_id, "--url", waiting.url,
        "--graph", GRAPH, "--by", "alice", "--args-sha256", waiting.args_sha256,
    )  # fmt: skip
    assert code == 0, err
    assert f"approve recorded for {waiting.approval_id} by alice" in out
    assert "the run finished" in out
    assert _status(waiting) == "approved"
    with open_checkpointer_sync(waiting.url) as saver:
        decision = get_approval_sync(saver, waiting.approval_id).decision
    assert decision is not None
    assert (decision["by"], decision["decider_source"]) == ("alice", "cli")
    code, out, _ = _run(capsys, "approvals", "list", "--url", waiting.url, "--status", "all")
    assert "approved" in out


def test_edit_with_set(waiting: Waiting, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys, "approvals", "edit", waiting.approval_id, "--url", waiting.url, "--graph", GRAPH,
        "--by", "erin", "--role", "finance", "--args-sha256", waiting.args_sha256,
        "--set", "amount=120", "--reason", "partial",
    )  # fmt: skip
    assert code == 0, err
    code, out, _ = _run(capsys, "approvals", "show", waiting.approval_id, "--url", waiting.url)
    assert "decision      edit by erin" in out
    assert '"amount": 120,' in out


def test_expire(waiting: Waiting, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "approvals", "expire", "--url", waiting.url, "--graph", GRAPH)
    assert (code, out.strip()) == (0, "no expired approvals")
    late = "2999-01-01T00:00:00+00:00"
    code, out, _ = _run(
        capsys, "approvals", "expire", "--url", waiting.url, "--graph", GRAPH, "--now", late
    )
    assert code == 0
    assert f"{waiting.approval_id}  stopped" in out
    assert _status(waiting) == "expired"


SIGNED = ["--args-sha256", "{sha}", "--by", "alice"]
BAD_INPUT = [
    (["approve", "apr_unknown", *SIGNED], "no approval request 'apr_unknown'"),
    (["approve", "{id}", "--args-sha256", "{sha}", "--by", "zed"], "'zed' (roles []) may not"),
    (["approve", "{id}", "--args-sha256", "beef", "--by", "alice"], "decision names 'beef'"),
    (["approve", "{id}", *SIGNED, "--graph", "nocolon"], "must be 'module:factory'"),
    (["approve", "{id}", *SIGNED, "--graph", "no_such_mod:f"], "cannot import"),
    (["approve", "{id}", *SIGNED, "--graph", "tests.approvals.graphs:nothing"], "no callable"),
    (["approve", "{id}", *SIGNED, "--graph", "tests.approvals.graphs:PayArgs"], "factory failed"),
    (["approve", "{id}", *SIGNED, "--graph", "builtins:str"], "returned str, not a compiled"),
    (["edit", "{id}", *SIGNED, "--set", "amount"], "must be KEY=VALUE"),
    (["edit", "{id}", *SIGNED, "--set", "colour=red"], "has no argument 'colour'"),
    (["edit", "{id}", *SIGNED, "--set", "amount=-1"], "greater than 0"),
    (["edit", "{id}", *SIGNED, "--args-json", "{{oops"], "not valid JSON"),
    (["edit", "{id}", *SIGNED], "exactly one of --set"),
    (["expire", "--now", "yesterday"], "not an ISO 8601 time"),
    (["expire", "--now", "2030-01-01T00:00:00"], "needs a time zone"),
    (["show", "apr_unknown"], "no approval request 'apr_unknown'"),
    (["resume", "apr_unknown"], "no approval request 'apr_unknown'"),
    (["resume", "{id}"], "has no stored decision"),
]


@pytest.mark.parametrize(("extra", "message"), BAD_INPUT)
def test_bad_input_fails_clearly_and_changes_nothing(
    waiting: Waiting, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    args = [a.format(id=waiting.approval_id, sha=waiting.args_sha256) for a in extra]
    argv = ["approvals", args[0], *args[1:], "--url", waiting.url]
    if args[0] in {"approve", "edit", "expire", "resume"} and "--graph" not in args:
        argv += ["--graph", GRAPH]
    code, _, err = _run(capsys, *argv)
    assert code == 1
    assert message in err
    assert _status(waiting) == "pending"


def test_a_bad_url_fails_clearly(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "approvals", "list", "--url", "mysql://db")
    assert code == 1
    assert "unknown checkpointer URL scheme 'mysql'" in err
