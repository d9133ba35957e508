"""What an approver sees cannot be spoofed by the text being approved.

A ``why`` built from a model-chosen argument carried a newline, a fake
"arguments" block with a small amount, and an ANSI sequence hiding the rest:
the approver read 10 cents where the request binds 500000. Every field shown
is now escaped (control, ANSI, bidi and invisible characters made visible), and
the bound arguments and their hash come first.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig

from tests.approvals import graphs
from tether import open_checkpointer_sync
from tether.approvals import (
    ApprovalView,
    Approvers,
    escape_json,
    escape_text,
    format_approval,
    format_approval_line,
    list_approvals_sync,
)
from tether.cli import main

CONFIG: RunnableConfig = {"configurable": {"thread_id": "t1"}}
AMOUNT = 500_000


def _hidden(text: str) -> list[str]:
    """Characters a terminal or browser would not show as themselves (line breaks aside)."""
    return [
        f"U+{ord(ch):04X}"
        for ch in text
        if ch != "\n"
        and (
            unicodedata.category(ch)[0] == "C"
            or unicodedata.category(ch) in ("Zl", "Zp")
            or (unicodedata.category(ch) == "Zs" and ch != " ")
            or ch in "\u115f\u1160\u3164\uffa0"
        )
    ]


def _paused(tmp_path: Path, reason: str) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / f'{len(reason)}.db'}"
    with open_checkpointer_sync(url) as saver:
        graphs.refund_graph(reason)(saver).invoke({"amount": AMOUNT, "log": []}, CONFIG)
        (view,) = list_approvals_sync(saver)
    return url, view.request.approval_id


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain words, é 日本 😀", "plain words, é 日本 😀"),
        ("a\nb\r\tc", "a\\nb\\r\\tc"),
        ("\x1b[8mhidden", "\\x1b[8mhidden"),
        ("\x1b]8;;http://x\x07l", "\\x1b]8;;http://x\\x07l"),
        ("\x9b2J\x7f\x00", "\\x9b2J\\x7f\\x00"),
        ("\u202eabc\u202c", "\\u202eabc\\u202c"),
        (
            "\u2066\u2067\u2068\u2069\u200e\u200f\u202a\u202b\u202d",
            ("\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f\\u202a\\u202b\\u202d"),
        ),
        ("zero\u200bwidth\ufeff\u2060\u00ad", "zero\\u200bwidth\\ufeff\\u2060\\xad"),
        ("\u3164\u115f\uffa0", "\\u3164\\u115f\\uffa0"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("nb\u00a0sp\u3000", "nb\\xa0sp\\u3000"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("back\\slash \\n", "back\\\\slash \\\\n"),  # a typed "\n" stays distinguishable
    ],
)
def test_escape_text(raw: str, shown: str) -> None:
    assert escape_text(raw) == shown
    assert _hidden(escape_text(raw)) == []


def test_escape_json_is_valid_json_of_the_same_value() -> None:
    value = {graphs.HOSTILE: [graphs.HOSTILE, 1, None, {"k\u202e": "v\x1b"}], "n": 10}
    for indent in (None, 2):
        text = escape_json(value, indent=indent)
        assert _hidden(text) == []
        assert json.loads(text) == value
    assert escape_json({"a": 1}, indent=2).count("\n") == 2  # structure keeps its lines


def test_a_hostile_why_cannot_change_the_amount_the_approver_sees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, approval_id = _paused(tmp_path, graphs.HOSTILE)
    shown = _cli(capsys, "approvals", "show", approval_id, "--url", url)
    benign_url, benign_id = _paused(tmp_path, "box was damaged")
    benign = _cli(capsys, "approvals", "show", benign_id, "--url", benign_url)

    assert _hidden(shown) == []  # no ANSI, bidi, control or invisible character reaches the screen
    lines = shown.splitlines()
    assert len(lines) == len(benign.splitlines())  # the hostile text added no line
    # The bound arguments and their hash come first, right under the title...
    with open_checkpointer_sync(url) as saver:
        (view,) = list_approvals_sync(saver)
    assert lines[1].startswith(f"  arguments     sha256 {view.request.args_sha256}")
    assert [i for i, line in enumerate(lines) if line.lstrip().startswith("arguments")] == [1]
    # ...and the only line that reads as an amount is the bound one.
    amounts = [line.strip() for line in lines if line.lstrip().startswith('"amount_cents"')]
    assert amounts == [f'"amount_cents": {AMOUNT},']
    # The fake block is still there for the approver to read, escaped, on the why line.
    (why,) = [line for line in lines if line.startswith("  why")]
    assert '\\n                    "amount_cents": 10\\n' in why
    assert "\\x1b[8m" in why
    assert "\\u202e01 stnec\\u202c" in why


def test_every_field_shown_is_escaped(tmp_path: Path) -> None:
    url, _ = _paused(tmp_path, graphs.HOSTILE)
    with open_checkpointer_sync(url) as saver:
        (view,) = list_approvals_sync(saver)
    h = graphs.HOSTILE
    request = replace(
        view.request,
        action=f"refund{h}",
        thread_id=f"t{h}",
        node=f"n{h}",
        approvers=Approvers(users=[f"dana{h}"], roles=[f"lead{h}"]),
        replaces=f"apr{h}",
        status_reason=h,
        escalations=[{"at": h, "to": {"users": [h]}, "expires_at": h}],
    )
    decision = {"decision": "edit", "by": f"mallory{h}", "at": h, "reason": h,
                "args_sha256": h, "args": {h: h}}  # fmt: skip
    now = datetime(2026, 11, 1, tzinfo=UTC)
    for shown in (
        format_approval(ApprovalView(request, decision, "edited"), url=f"sqlite:///{h}", now=now),
        format_approval(ApprovalView(request, None, "pending"), url=f"sqlite:///{h}", now=now),
        format_approval_line(ApprovalView(request, None, "pending"), now=now),
    ):
        assert _hidden(shown) == [], shown
    assert "\n" not in format_approval_line(ApprovalView(request, None, "pending"), now=now)


def test_list_and_json_output_show_no_hidden_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, approval_id = _paused(tmp_path, graphs.HOSTILE)
    listed = _cli(capsys, "approvals", "list", "--url", url)
    assert _hidden(listed) == []
    assert len(listed.splitlines()) == 1
    listed_json = _cli(capsys, "approvals", "list", "--url", url, "--json")
    shown_json = _cli(capsys, "approvals", "show", approval_id, "--url", url, "--json")
    for text in (listed_json, shown_json):
        assert _hidden(text) == []
    # Escaped, not altered: the JSON still parses to exactly what was stored.
    assert json.loads(listed_json)[0]["args"]["reason"] == graphs.HOSTILE
    assert json.loads(shown_json)["why"].endswith(graphs.HOSTILE)
