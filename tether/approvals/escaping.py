"""Text an approver can trust: what is shown is what is stored, character for character.

Much of an approval request is text the agent wrote, often from arguments a
model chose: ``why``, ``affects``, the observations, even argument keys. Shown
raw, a newline can fake a line of the request, an ANSI sequence (CSI, OSC) can
recolour, hide or overwrite what follows, and a bidi control can reorder the
digits of an amount. So every field goes through one of these two functions
before it reaches a terminal, and the web inbox must use them too (then escape
for HTML as usual):

* :func:`escape_text` for free text: each character that does not show as
  itself becomes a visible escape (``\\n``, ``\\x1b``, ``\\u202e``,
  ``\\U000e0041``) and a backslash becomes ``\\\\``, so a typed ``\\n`` and an
  escaped newline look different.
* :func:`escape_json` for structured values (arguments, observations): JSON
  with the same characters written as ``\\uXXXX`` escapes, so the text is
  still valid JSON of exactly the stored value.

What counts as "does not show as itself": every Unicode control, format,
surrogate, private-use and unassigned character (categories ``C*``: C0 and C1
controls, ESC, DEL, the bidi embeddings, overrides and isolates U+202A-202E and
U+2066-2069, the marks U+200E/U+200F, zero-width characters, the byte order
mark, tag characters), line and paragraph separators, every space other than
U+0020, and the letters that render as nothing (Hangul fillers). Combining
marks are kept: many scripts need them, and amounts are shown as JSON numbers.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = ["escape_json", "escape_text", "is_hidden"]

# Letters (category Lo) that render as blank: the Hangul fillers.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def is_hidden(ch: str) -> bool:
    """Whether ``ch`` would not show as itself: it controls, hides or is invisible."""
    category = unicodedata.category(ch)
    return (
        category[0] == "C"
        or category in ("Zl", "Zp")
        or (category == "Zs" and ch != " ")
        or ch in _BLANK_LETTERS
    )


def _code(ch: str) -> str:
    point = ord(ch)
    if point < 0x100:
        return f"\\x{point:02x}"
    if point < 0x10000:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"


def escape_text(text: object) -> str:
    """``text`` (as ``str``) with every hidden character and backslash written as an escape.

    The result is one line (newlines become ``\\n``), shows nothing a terminal
    or browser would interpret, and maps back to the input unambiguously.
    """
    return "".join(_NAMED.get(ch) or (_code(ch) if is_hidden(ch) else ch) for ch in str(text))


def _json_code(ch: str) -> str:
    # JSON writes a character beyond the BMP as a surrogate pair.
    data = ch.encode("utf-16-be", "surrogatepass")
    units = (int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
    return "".join(f"\\u{unit:04x}" for unit in units)


def escape_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON (keys sorted) in which no character is hidden.

    ``json.loads`` of the result gives ``value`` back. With ``indent`` the
    layout's own line breaks stay; inside strings JSON already escapes them.
    """
    text = json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=True, default=str)
    # Only strings can hold hidden characters (the layout is ASCII), and a raw
    # newline can only be layout: JSON escapes the ones inside strings.
    return "".join(_json_code(ch) if ch != "\n" and is_hidden(ch) else ch for ch in text)
