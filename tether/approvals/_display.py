"""Approvals as a person reads them: escaped text, and the whole request laid out.

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

:func:`approval_fields` is the layout as data (label, escaped lines), in the
order an approver should read it, the bound arguments and their SHA-256 first,
before any free text; :func:`format_approval` renders it for a terminal, and a
web page can render the same fields (escaping them for HTML).
"""

from __future__ import annotations

import json
import unicodedata
from datetime import UTC, datetime
from typing import Any

from tether.approvals._policies import Escalate, ExpiryPolicy
from tether.approvals._storage import ApprovalView

__all__ = [
    "approval_fields",
    "describe_policy",
    "escape_json",
    "escape_text",
    "format_approval",
    "format_approval_line",
    "is_hidden",
]

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


# -- the layout ----------------------------------------------------------------------------
Field = tuple[str, list[str]]
_INDENT = " " * 18


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes or not parts else []
    return " ".join(parts)


def describe_policy(policy: ExpiryPolicy) -> str:
    """One line for a (possibly chained) expiry policy."""
    if isinstance(policy, Escalate):
        who = _who(policy.to.to_dict())
        return (
            f"escalate to {who} for {_duration(policy.expires_in.total_seconds())}, then "
            f"{describe_policy(policy.then)}"
        )
    name = policy.to_dict()["policy"]
    return {
        "stop": "stop the run (partial result)",
        "safe_alternative": "take the safe alternative",
    }[name]


def _who(approvers: dict[str, Any]) -> str:
    return "; ".join(
        f"{k}: {', '.join(escape_text(name) for name in v)}" for k, v in approvers.items() if v
    )


def _expiry(view: ApprovalView, now: datetime) -> str:
    left = (datetime.fromisoformat(view.request.expires_at) - now).total_seconds()
    when = f"in {_duration(left)}" if left > 0 else f"{_duration(-left)} ago"
    return f"{escape_text(view.request.expires_at)} ({when})"


def _status(view: ApprovalView, now: datetime) -> str:
    return "overdue" if view.overdue(now) else view.status


def format_approval_line(view: ApprovalView, now: datetime | None = None) -> str:
    """One line for ``tether approvals list``."""
    r = view.request
    moment = now or datetime.now(UTC)
    args = escape_json(r.args)
    if len(args) > 60:
        args = args[:57] + "..."
    return (
        f"{escape_text(r.approval_id)}  {_status(view, moment):<8}  {escape_text(r.action)}  "
        f"{args}  thread={escape_text(r.thread_id)}  expires {_expiry(view, moment)}"
    )


def _json_field(label: str, sha: str, value: Any, note: str = "") -> Field:
    return (label, [f"sha256 {escape_text(sha)}{note}", *escape_json(value, indent=2).splitlines()])


def _request_fields(view: ApprovalView, now: datetime) -> list[Field]:
    r = view.request
    depends = ", ".join(f"{escape_text(k)}@{escape_json(v)}" for k, v in r.depends_on.items())
    fields: list[Field] = [
        _json_field("arguments", r.args_sha256, r.args, "  (exactly these run if approved)"),
        ("action", [escape_text(r.action)]),
        ("why", [escape_text(r.why)]),
        ("affects", [escape_text(r.affects or "-")]),
        ("if denied", [escape_text(r.if_denied or "-")]),
        _json_field("observations", r.observations_sha256, r.observations),
        ("depends on", [depends or "-"]),
        ("who decides", [_who(r.approvers.to_dict())]),
        ("requested", [escape_text(r.requested_at)]),
        ("expires", [_expiry(view, now)]),
        ("on expiry", [f"{describe_policy(r.on_expiry)} (a timeout never approves)"]),
        (
            "thread",
            [
                f"{escape_text(r.thread_id)}  node {escape_text(r.node or '-')}  "
                f"revision {r.revision}"
            ],
        ),
    ]
    if r.alternative:
        alt = r.alternative
        shown = f"{escape_text(alt['action'])} {escape_json(alt['args'])} "
        fields.append(("alternative", [shown + escape_text(alt["description"])]))
    if r.replaces:
        fields.append(
            ("replaces", [f"{escape_text(r.replaces)} (voided: its preconditions changed)"])
        )
    for step in r.escalations:
        fields.append(
            (
                "escalated",
                [
                    f"at {escape_text(step['at'])} to {escape_json(step['to'])} until "
                    f"{escape_text(step['expires_at'])}"
                ],
            )
        )
    if r.status_reason:
        fields.append(("note", [escape_text(r.status_reason)]))
    return fields


def _decision_fields(view: ApprovalView, url: str | None) -> list[Field]:
    r = view.request
    if view.decision:
        d = view.decision
        reason = f" ({escape_text(d['reason'])})" if d.get("reason") else ""
        fields: list[Field] = [
            (
                "decision",
                [
                    f"{escape_text(d['decision'])} by {escape_text(d['by'])} at "
                    f"{escape_text(d['at'])}{reason}"
                ],
            )
        ]
        if d["decision"] == "edit":
            fields.append(_json_field("edited args", d["args_sha256"], d["args"]))
        return fields
    if view.status != "pending":
        return []
    where = f" --url {escape_text(url)}" if url else " --url URL"
    return [
        (
            "to decide",
            [
                f"tether approvals approve|reject|edit {escape_text(r.approval_id)}{where} "
                f"--by USER --args-sha256 {escape_text(r.args_sha256)}"
            ],
        )
    ]


def approval_fields(
    view: ApprovalView, url: str | None = None, now: datetime | None = None
) -> list[Field]:
    """The request as ``(label, lines)`` pairs, every line escaped, the bound arguments first.

    Args:
        view: The request with its decision.
        url: The checkpointer URL, for the "to decide" command line.
        now: The time to count the expiry from (default: now).
    """
    moment = now or datetime.now(UTC)
    return [*_request_fields(view, moment), *_decision_fields(view, url)]


def format_approval(view: ApprovalView, url: str | None = None, now: datetime | None = None) -> str:
    """The whole request, readable: arguments first, then what, why, who, when, decision."""
    moment = now or datetime.now(UTC)
    title = f"Approval {escape_text(view.request.approval_id)}  [{_status(view, moment)}]"
    lines = [title]
    for label, (first, *rest) in approval_fields(view, url, moment):
        lines.append(f"  {label:<13} {first}")
        lines.extend(_INDENT + line for line in rest)
    return "\n".join(lines)
