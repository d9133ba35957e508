"""Tables and messages as text (terminals) and as escaped HTML (notebooks)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

__all__ = ["as_message", "html_table", "message_line", "short", "text_table"]

_WIDTH = 80


def short(value: Any, width: int = _WIDTH) -> str:
    """One line of at most ``width`` characters."""
    text = value if isinstance(value, str) else _json(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


_MESSAGES: dict[str, type[BaseMessage]] = {
    "ai": AIMessage,
    "human": HumanMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
    "AIMessageChunk": AIMessageChunk,
}


def as_message(value: Any) -> BaseMessage | None:
    """``value`` as a message: a message, or a message's JSON (as a server sends it)."""
    if isinstance(value, BaseMessage):
        return value
    if isinstance(value, Mapping) and "type" in value and "content" in value:
        kind = _MESSAGES.get(str(value["type"]))
        try:
            if kind is not None:  # all its fields, as the message was dumped
                return kind.model_validate(dict(value))
            return convert_to_messages([dict(value)])[0]
        except (ValueError, TypeError, NotImplementedError):
            return None
    return None


def message_line(message: BaseMessage, width: int = _WIDTH) -> str:
    """``ai: text → tool(args)``: who said what, and which tools it asked for."""
    calls = getattr(message, "tool_calls", None) or []
    asked = " ".join(f"→ {c['name']}({short(c.get('args', {}), 60)})" for c in calls)
    content = message.content if isinstance(message.content, str) else _json(message.content)
    text = " ".join(part for part in (short(content, width), asked) if part)
    return f"{message.type}: {text}"


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with aligned columns."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    """An HTML table, every cell escaped (outputs are data, never markup)."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    table = f"{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
    return f'<table class="tether-debug">{table}</table>'
