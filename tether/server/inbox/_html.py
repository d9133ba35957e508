"""The inbox's pages as HTML text, server-rendered, with no script at all.

Every value shown passes through :func:`esc`: first
:func:`tether.approvals.escape_text` (or ``escape_json`` for structured values,
or the escaped lines of :func:`tether.approvals.approval_fields`), which makes
control, bidi and invisible characters visible, then :func:`html.escape`. The
pages are served with a Content-Security-Policy that allows no script, so even
a value that slipped through could not run.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from datetime import datetime

from tether.approvals import approval_fields, escape_json, escape_text
from tether.server._identity import User
from tether.server._paths import quote_id
from tether.server.inbox._fields import PREFIX, ArgField
from tether.server.inbox._filters import Filters
from tether.server.inbox._queue import Entry

__all__ = [
    "HEADERS",
    "approval_url",
    "detail_page",
    "esc",
    "expired_page",
    "login_page",
    "message_page",
    "queue_page",
]

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
header{background:#20304a;color:#fff;padding:.6em 1.2em;display:flex;gap:1.5em;align-items:center}
header a{color:#fff} header form{margin-left:auto} main{padding:1em 1.2em;max-width:72em}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border:1px solid #ddd;padding:.35em .5em;text-align:left;vertical-align:top}
pre{margin:0;white-space:pre-wrap;word-break:break-all;font-size:13px}
dl{display:grid;grid-template-columns:11em 1fr;gap:.3em 1em;background:#fff;padding:1em;
border:1px solid #ddd} dt{font-weight:600} dd{margin:0}
.error{background:#fde8e8;border:1px solid #c33;padding:.6em;margin:.6em 0}
.forms{display:grid;grid-template-columns:repeat(auto-fit,minmax(20em,1fr));gap:1em;margin-top:1em}
.forms form{background:#fff;border:1px solid #ddd;padding:1em}
label{display:block;margin:.4em 0} input[type=text],textarea{width:100%;box-sizing:border-box}
.first{background:#fff8e0}
"""


def esc(value: object) -> str:
    """``value`` as text safe in HTML: hidden characters made visible, then HTML-escaped."""
    return html.escape(escape_text(value), quote=True)


def _lines(lines: Iterable[str]) -> str:
    """Lines already escaped for a terminal (``approval_fields``), escaped for HTML."""
    return html.escape("\n".join(lines), quote=True)


def _duration(seconds: float) -> str:
    seconds = abs(seconds)
    minutes = int(seconds // 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes or not parts else []
    return " ".join(parts)


def _until(seconds: float) -> str:
    return f"in {_duration(seconds)}" if seconds > 0 else f"{_duration(seconds)} ago"


def approval_url(approval_id: str) -> str:
    """The detail page of a request."""
    return f"/inbox/a/{quote_id(approval_id)}"


def page(title: str, body: str, user: User | None, csrf: str) -> str:
    """A whole page: the header (who is logged in, the views), then ``body``."""
    who = ""
    if user is not None:
        roles = f" ({esc(', '.join(user.roles))})" if user.roles else ""
        tenant = f" tenant {esc(user.tenant)}" if user.tenant else ""
        who = (
            f'<span id="who">{esc(user.identity)}{roles}{tenant}</span>'
            f'<form method="post" action="/inbox/logout">{_csrf(csrf)}'
            '<button type="submit">Log out</button></form>'
        )
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)} · tether</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_STYLE}</style></head><body>"
        '<header><strong>tether approvals</strong><a href="/inbox">Queue</a>'
        f'<a href="/inbox/expired">Expired and orphaned</a>{who}</header>'
        f"<main><h1>{esc(title)}</h1>{body}</main></body></html>\n"
    )


def _csrf(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{html.escape(token, quote=True)}">'


def _error(problem: str | None) -> str:
    return f'<div class="error" role="alert">{esc(problem)}</div>' if problem else ""


def _short_json(value: object, limit: int = 120) -> str:
    text = escape_json(value)
    return html.escape(text if len(text) <= limit else text[: limit - 3] + "...", quote=True)


def _who(entry: Entry) -> str:
    approvers = entry.view.request.approvers
    parts = [f"users: {', '.join(approvers.users)}"] if approvers.users else []
    parts += [f"roles: {', '.join(approvers.roles)}"] if approvers.roles else []
    return esc("; ".join(parts))


def _table(items: list[Entry], now: datetime, empty: str) -> str:
    if not items:
        return f"<p>{esc(empty)}</p>"
    rows = []
    for item in items:
        r = item.view.request
        run = item.run
        run_text = esc(f"{run.graph_id} {run.run_id}") if run is not None else "-"
        mark = "yes" if item.may_decide else "no"
        rows.append(
            f'<tr data-approval="{esc(r.approval_id)}">'
            f'<td><a href="{approval_url(r.approval_id)}">{esc(r.action)}</a></td>'
            f"<td><pre>{_short_json(r.args)}</pre></td>"
            f"<td>{esc(item.state)}</td>"
            f"<td>{esc(_until(item.expires_in_seconds(now)))}</td>"
            f"<td>{esc(_duration(item.age_seconds(now)))}</td>"
            f"<td>{_who(item)}</td><td>{mark}</td><td>{run_text}</td></tr>"
        )
    return (
        "<table><thead><tr><th>action</th><th>arguments</th><th>state</th><th>expires</th>"
        "<th>waiting for</th><th>who decides</th><th>you may decide</th><th>run</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _filter_form(filters: Filters) -> str:
    def field(name: str, label: str, value: object) -> str:
        shown = "" if value is None else esc(value)
        return f'<label>{label} <input type="text" name="{name}" value="{shown}"></label>'

    older = None if filters.older_than is None else f"{int(filters.older_than.total_seconds())}"
    before = None if filters.expiring_before is None else filters.expiring_before.isoformat()
    sort = "".join(
        f'<option value="{s}"{" selected" if filters.sort == s else ""}>{label}</option>'
        for s, label in (("expiry", "soonest-expiring first"), ("age", "oldest first"))
    )
    return (
        '<details><summary>Filter</summary><form method="get" action="/inbox">'
        f"{field('approver', 'approver (user id)', filters.approver)}"
        f"{field('role', 'approver role', filters.role)}"
        f"{field('expiring_before', 'expiring before (ISO 8601)', before)}"
        f"{field('older_than', 'older than (90s, 15m, 2h, 3d)', older)}"
        f'<label><input type="checkbox" name="mine" value="true"'
        f"{' checked' if filters.mine else ''}> only those I may decide</label>"
        f'<label>order <select name="sort">{sort}</select></label>'
        '<button type="submit">Apply</button></form></details>'
    )


def queue_page(
    user: User,
    items: list[Entry],
    filters: Filters,
    now: datetime,
    csrf: str,
    *,
    problem: str | None = None,
) -> str:
    """The queue: requests runs wait on, in the order the filters ask for."""
    order = "oldest first" if filters.sort == "age" else "soonest-expiring first, then oldest"
    body = (
        f"{_error(problem)}"
        f"<p>{len(items)} request(s) waiting on a person, {esc(order)}.</p>"
        f"{_filter_form(filters)}"
        f"{_table(items, now, 'Nothing is waiting on a person.')}"
    )
    return page("Waiting for a decision", body, user, csrf)


def expired_page(
    user: User, expired: list[Entry], orphaned: list[Entry], now: datetime, csrf: str
) -> str:
    """Requests that expired (or are overdue), and requests no run waits on any more."""
    body = (
        "<h2>Expired</h2><p>Past their expiry: the expiry policy settles them "
        "(<code>tether approvals expire</code>); a timeout never approves.</p>"
        f"{_table(expired, now, 'No expired requests.')}"
        "<h2>Orphaned</h2><p>Undecided, but no run waits on them any more (the run was "
        "cancelled or deleted): deciding them would resume nothing.</p>"
        f"{_table(orphaned, now, 'No orphaned requests.')}"
    )
    return page("Expired and orphaned requests", body, user, csrf)


def _fields(entry: Entry, now: datetime) -> str:
    rows = []
    for label, lines in approval_fields(entry.view, now=now):
        if label == "to decide":  # the command line; the forms below decide here
            continue
        css = ' class="first"' if label == "arguments" else ""
        rows.append(
            f'<dt{css}>{html.escape(label)}</dt><dd{css} data-field="{html.escape(label)}">'
            f"<pre>{_lines(lines)}</pre></dd>"
        )
    run = entry.run
    if run is not None:
        rows.append(
            f"<dt>run</dt><dd>{esc(run.run_id)} (graph {esc(run.graph_id)}, {esc(run.status)})</dd>"
        )
    return f"<dl>{''.join(rows)}</dl>"


def _arg_inputs(fields: list[ArgField]) -> str:
    out = []
    for f in fields:
        kind = f" ({esc(f.kind)})" if f.kind else ""
        out.append(
            f"<label>{esc(f.name)}{kind}"
            f'<input type="text" name="{html.escape(PREFIX + f.name, quote=True)}" '
            f'value="{html.escape(f.value, quote=True)}"></label>'
        )
    return "".join(out)


def _forms(entry: Entry, fields: list[ArgField], csrf: str, reason: str) -> str:
    r = entry.view.request
    action = f"{approval_url(r.approval_id)}/decide"
    hidden = (
        f"{_csrf(csrf)}"
        f'<input type="hidden" name="args_sha256" value="{html.escape(r.args_sha256, quote=True)}">'
    )
    why = html.escape(reason, quote=True)
    return (
        '<div class="forms">'
        f'<form method="post" action="{action}" id="approve">{hidden}'
        '<input type="hidden" name="decision" value="approve">'
        "<h2>Approve</h2><p>Run exactly the arguments shown above.</p>"
        '<label>reason (optional)<input type="text" name="reason"></label>'
        '<button type="submit">Approve</button></form>'
        f'<form method="post" action="{action}" id="edit">{hidden}'
        '<input type="hidden" name="decision" value="edit">'
        "<h2>Edit and approve</h2><p>Run these arguments instead; they are checked against "
        "the action's schema.</p>"
        f"{_arg_inputs(fields)}"
        f'<label>reason<input type="text" name="reason" value="{why}"></label>'
        '<button type="submit">Approve with these arguments</button></form>'
        f'<form method="post" action="{action}" id="reject">{hidden}'
        '<input type="hidden" name="decision" value="reject">'
        "<h2>Reject</h2><p>The action does not run; the agent is told why.</p>"
        '<label>reason (required)<textarea name="reason" required></textarea></label>'
        '<button type="submit">Reject</button></form>'
        "</div>"
    )


def _cannot_decide(entry: Entry, user: User) -> str:
    state = entry.state
    if state == "pending":
        return (
            f"<p>You ({esc(user.identity)}) are not among the approvers of this request, "
            "so you cannot decide it.</p>"
        )
    reasons = {
        "starting": "Its run is still executing; it can be decided once the run stops at it.",
        "orphaned": "No run waits on it any more, so deciding it would resume nothing.",
        "overdue": "It expired; its expiry policy settles it (tether approvals expire).",
    }
    return f"<p>{esc(reasons.get(state, f'It is {state}: there is nothing left to decide.'))}</p>"


def detail_page(
    user: User,
    entry: Entry,
    fields: list[ArgField],
    now: datetime,
    csrf: str,
    *,
    problem: str | None = None,
    reason: str = "",
) -> str:
    """One request in full, and the forms to decide it when the user may."""
    r = entry.view.request
    decidable = entry.state == "pending" and entry.may_decide
    body = (
        f"{_error(problem)}"
        f'<p>state: <strong id="state">{esc(entry.state)}</strong> · id {esc(r.approval_id)}</p>'
        f"{_fields(entry, now)}"
        f"{_forms(entry, fields, csrf, reason) if decidable else _cannot_decide(entry, user)}"
    )
    return page(f"{r.action}", body, user, csrf)


def login_page(
    csrf: str, problem: str | None = None, enabled: bool = True, credential: str | None = None
) -> str:
    """The login form: with ``--no-auth``, who you say you are; when the server
    authenticates, the credential to paste (``credential`` says which: ``"key"`` for
    the built-in API keys, ``"authorization"`` for the project's ``auth.path``)."""
    if credential is not None:
        if credential == "key":
            what = "your API key (the one <code>tether apikeys create</code> printed)"
            label = "API key"
        else:
            what = (
                "the value of the <code>Authorization</code> header this server's "
                "authentication accepts from you (for example <code>Bearer …</code>)"
            )
            label = "Authorization header value"
        body = (
            f"{_error(problem)}"
            f"<p>Paste {what}. It is checked now, then kept on the server for this session "
            "only; your browser gets a session cookie.</p>"
            f'<form method="post" action="/inbox/login" id="login">{_csrf(csrf)}'
            f'<label>{label}<input type="password" name="credential" required '
            'autocomplete="off"></label>'
            '<button type="submit">Log in</button></form>'
        )
        return page("Log in", body, None, csrf)
    if not enabled:
        body = (
            "<p>This server has no authentication configured, so the inbox cannot tell who "
            "you are. Start it with <code>tether serve --no-auth</code> on a machine of your "
            "own to try it.</p>"
        )
        return page("Log in", body, None, csrf)
    body = (
        f"{_error(problem)}"
        "<p>This server runs with <code>--no-auth</code>: whoever you say you are is "
        "trusted. Use it on a machine of your own.</p>"
        f'<form method="post" action="/inbox/login" id="login">{_csrf(csrf)}'
        '<label>user id<input type="text" name="user" required></label>'
        '<label>roles (comma separated)<input type="text" name="roles"></label>'
        '<label>tenant (empty: the default tenant)<input type="text" name="tenant"></label>'
        '<button type="submit">Log in</button></form>'
    )
    return page("Log in", body, None, csrf)


def message_page(title: str, problem: str, user: User | None, csrf: str) -> str:
    """A page saying what went wrong."""
    body = f'{_error(problem)}<p><a href="/inbox">Back to the queue</a></p>'
    return page(title, body, user, csrf)
