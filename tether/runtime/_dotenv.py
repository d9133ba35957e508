"""Read a ``.env`` file the way ``langgraph dev`` does, without python-dotenv.

``langgraph.json`` may name a ``.env`` file as its ``env``; the LangGraph CLI
reads it with python-dotenv (``DotEnv(path).dict()``). This module follows the
same rules, so a project's file means the same thing under tether:

- ``KEY=value`` and ``export KEY=value``; the key may be single-quoted.
- Unquoted values end at the line; `` # comment`` after white space is dropped,
  and so is trailing white space. ``KEY= # x`` is empty; ``KEY=#x`` is ``#x``.
- ``'single'`` and ``"double"`` quoted values may span lines; in single quotes
  ``\\'`` and ``\\\\`` are escapes, in double quotes also ``\\n``, ``\\t``, ``\\"``
  and the other C escapes.
- ``${NAME}`` and ``${NAME:-default}`` are expanded in every value, from the
  keys defined earlier in the file first, then from the process environment.
- A line without ``=`` (``KEY``) sets nothing; a line that cannot be parsed is
  skipped with a warning naming its line number, as python-dotenv does.
"""

from __future__ import annotations

import codecs
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["parse_dotenv", "read_dotenv"]

logger = logging.getLogger(__name__)

_BLANK = re.compile(r"\s*")
_EXPORT = re.compile(r"(?:export[^\S\r\n]+)?")
_KEY = re.compile(r"'([^']+)'|([^=#\s]+)")
_SPACES = re.compile(r"[^\S\r\n]*")
_EQUALS = re.compile(r"=[^\S\r\n]*")
_SINGLE = re.compile(r"'((?:\\.|[^'\\])*)'", re.DOTALL)
_DOUBLE = re.compile(r'"((?:\\.|[^"\\])*)"', re.DOTALL)
_UNQUOTED = re.compile(r"[^\r\n]*")
_TAIL = re.compile(r"[^\S\r\n]*(?:#[^\r\n]*)?[^\S\r\n]*(?:\r\n|\n|\r|$)")
_REST_OF_LINE = re.compile(r"[^\r\n]*(?:\r\n|\n|\r)?")
_SINGLE_ESCAPES = re.compile(r"\\[\\']")
_DOUBLE_ESCAPES = re.compile(r"\\[\\'\"abfnrtv]")
_VARIABLE = re.compile(r"\$\{(?P<name>[^}:]*)(?::-(?P<default>[^}]*))?\}")


class _Unparsable(Exception):
    """The statement at the cursor is not ``KEY[=value]``."""


def _unescape(pattern: re.Pattern[str], text: str) -> str:
    return pattern.sub(lambda m: codecs.decode(m.group(0), "unicode-escape"), text)


class _Cursor:
    """A position in the text, advanced by matching patterns at it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def take(self, pattern: re.Pattern[str]) -> re.Match[str]:
        match = pattern.match(self.text, self.pos)
        if match is None:
            raise _Unparsable
        self.pos = match.end()
        return match

    def peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def line(self) -> int:
        return self.text.count("\n", 0, self.pos) + 1


def _value(cur: _Cursor) -> str:
    first = cur.peek()
    if first == "'":
        return _unescape(_SINGLE_ESCAPES, cur.take(_SINGLE).group(1))
    if first == '"':
        return _unescape(_DOUBLE_ESCAPES, cur.take(_DOUBLE).group(1))
    if first in ("", "\n", "\r"):
        return ""
    raw = cur.take(_UNQUOTED).group(0)
    return re.sub(r"\s+#.*", "", raw).rstrip()


def _statement(cur: _Cursor) -> tuple[str, str | None] | None:
    """One ``KEY[=value]`` statement, or None for a comment line."""
    cur.take(_EXPORT)
    if cur.peek() == "#":
        cur.take(_REST_OF_LINE)
        return None
    key_match = cur.take(_KEY)
    key = key_match.group(1) or key_match.group(2)
    cur.take(_SPACES)
    value: str | None = None
    if cur.peek() == "=":
        equals = cur.take(_EQUALS).group(0)
        # "KEY= # note" is empty, but "KEY=#x" is the value "#x" (python-dotenv).
        value = "" if len(equals) > 1 and cur.peek() == "#" else _value(cur)
    cur.take(_TAIL)
    return key, value


def _expand(value: str, known: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        found = known.get(match["name"])
        if found is None:
            found = os.environ.get(match["name"])
        return found if found is not None else (match["default"] or "")

    return _VARIABLE.sub(one, value)


def parse_dotenv(text: str, *, source: str = "<string>") -> dict[str, str]:
    """The variables a ``.env`` text sets, in file order, with ``${...}`` expanded.

    Args:
        text: The file's content.
        source: Named in the warning for a line that cannot be parsed.
    """
    cur = _Cursor(text.removeprefix("\ufeff"))
    found: dict[str, str] = {}
    while True:
        cur.take(_BLANK)
        if not cur.peek():
            return found
        start = cur.pos
        try:
            statement = _statement(cur)
        except _Unparsable:
            cur.pos = start
            logger.warning("%s: could not parse the statement at line %d", source, cur.line())
            cur.take(_REST_OF_LINE)
            continue
        if statement is not None and statement[1] is not None:
            found[statement[0]] = _expand(statement[1], found)


def read_dotenv(path: Path) -> dict[str, str]:
    """The variables the ``.env`` file at ``path`` sets (see :func:`parse_dotenv`).

    Raises:
        OSError: The file cannot be read.
    """
    return parse_dotenv(path.read_text(encoding="utf-8"), source=str(path))
