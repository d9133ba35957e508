"""The ``.env`` reader gives what python-dotenv (and so ``langgraph dev``) gives.

Each expected mapping below is what python-dotenv's ``DotEnv(...).dict()``
returns for the same text (keys without a value dropped).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tether.runtime._dotenv import parse_dotenv, read_dotenv


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A=1\nB=2", {"A": "1", "B": "2"}),
        ("# note\nexport A=hello world  # trailing\n", {"A": "hello world"}),
        ("A='x # y'\nB=a#b\nC=a #b\n", {"A": "x # y", "B": "a#b", "C": "a"}),
        (
            "A= # comment\nB=#x\nC=\nD\nE =  spaced  \n",
            {"A": "", "B": "#x", "C": "", "E": "spaced"},
        ),
        ('A="a\\nb\\t\\"q\\""\n', {"A": 'a\nb\t"q"'}),
        ("B='sq\\'esc\\\\ \\n'\n", {"B": "sq'esc\\ \\n"}),
        ("'QK'=v\nA=\"multi\nline\"\n", {"QK": "v", "A": "multi\nline"}),
        ("\ufeffA=bom\r\nB=crlf\r\n", {"A": "bom", "B": "crlf"}),
        ("export  A=1\nexportB=2\n   C = 3\n", {"A": "1", "exportB": "2", "C": "3"}),
    ],
)
def test_syntax(text: str, expected: dict[str, str]) -> None:
    assert parse_dotenv(text) == expected


def test_expansion_uses_earlier_keys_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DE_HOME", "/h")
    monkeypatch.setenv("TETHER_DE_A", "from-env")
    text = (
        "TETHER_DE_A=1\n"
        "B=${TETHER_DE_A}-${TETHER_DE_HOME}-${TETHER_DE_NOPE:-dflt}-${C}-${TETHER_DE_NOPE}\n"
        "C=3\n"
        "D='${TETHER_DE_HOME}'\n"
    )
    assert parse_dotenv(text) == {"TETHER_DE_A": "1", "B": "1-/h-dflt--", "C": "3", "D": "/h"}


def test_a_bad_line_is_skipped_with_its_number(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tether.runtime._dotenv"):
        found = parse_dotenv('A=1\nB="x" junk\nC=ok\n', source="proj/.env")
    assert found == {"A": "1", "C": "ok"}
    assert "proj/.env: could not parse the statement at line 2" in caplog.text


def test_read_dotenv_reads_utf8(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text("GREETING=grüße\n", encoding="utf-8")
    assert read_dotenv(path) == {"GREETING": "grüße"}
