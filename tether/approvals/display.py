"""Approvals as a person reads them: the whole request, laid out for a terminal."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tether.approvals.inbox import ApprovalView
from tether.approvals.policies import Escalate, ExpiryPolicy

__all__ = ["describe_policy", "format_approval", "format_approval_line"]


def _block(value: Any, indent: str) -> list[str]:
    if isinstance(value, dict) and value:
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{indent}{key}:")
                lines.extend(_block(item, indent + "  "))
            else:
                lines.append(f"{indent}{key}: {json.dumps(item, ensure_ascii=False)}")
        return lines
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return [indent + line for line in text.splitlines()]


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
        who = "; ".join(f"{k}: {', '.join(v)}" for k, v in policy.to.to_dict().items() if v)
        return (
            f"escalate to {who} for {_duration(policy.expires_in.total_seconds())}, then "
            f"{describe_policy(policy.then)}"
        )
    name = policy.to_dict()["policy"]
    return {
        "stop": "stop the run (partial result)",
        "safe_alternative": "take the safe alternative",
    }[name]


def _approvers(view: ApprovalView) -> str:
    data = view.request.approvers.to_dict()
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in data.items() if v)


def _expiry(view: ApprovalView, now: datetime) -> str:
    left = (datetime.fromisoformat(view.request.expires_at) - now).total_seconds()
    when = f"in {_duration(left)}" if left > 0 else f"{_duration(-left)} ago"
    return f"{view.request.expires_at} ({when})"


def format_approval_line(view: ApprovalView, now: datetime | None = None) -> str:
    """One line for ``tether approvals list``."""
    r = view.request
    moment = now or datetime.now(UTC)
    args = json.dumps(r.args, ensure_ascii=False, sort_keys=True)
    if len(args) > 60:
        args = args[:57] + "..."
    status = "overdue" if view.overdue(moment) else view.status
    return (
        f"{r.approval_id}  {status:<8}  {r.action}  {args}  thread={r.thread_id}  "
        f"expires {_expiry(view, moment)}"
    )


def format_approval(view: ApprovalView, url: str | None = None, now: datetime | None = None) -> str:
    """The whole request, readable: what, why, arguments, observations, who, when, decision."""
    r = view.request
    moment = now or datetime.now(UTC)
    lines = [
        f"Approval {r.approval_id}  [{'overdue' if view.overdue(moment) else view.status}]",
        f"  action        {r.action}",
        f"  why           {r.why}",
        f"  affects       {r.affects or '-'}",
        f"  if denied     {r.if_denied or '-'}",
        f"  arguments     sha256 {r.args_sha256}",
        *_block(r.args, "                  "),
        f"  observations  sha256 {r.observations_sha256}",
        *_block(r.observations, "                  "),
        f"  depends on    {', '.join(f'{k}@{v}' for k, v in r.depends_on.items()) or '-'}",
        f"  who decides   {_approvers(view)}",
        f"  requested     {r.requested_at}",
        f"  expires       {_expiry(view, moment)}",
        f"  on expiry     {describe_policy(r.on_expiry)} (a timeout never approves)",
        f"  thread        {r.thread_id}  node {r.node or '-'}  revision {r.revision}",
    ]
    if r.alternative:
        alt = r.alternative
        lines.append(
            f"  alternative   {alt['action']} {json.dumps(alt['args'])} {alt['description']}"
        )
    if r.replaces:
        lines.append(f"  replaces      {r.replaces} (voided: its preconditions changed)")
    for step in r.escalations:
        lines.append(f"  escalated     at {step['at']} to {step['to']} until {step['expires_at']}")
    if r.status_reason:
        lines.append(f"  note          {r.status_reason}")
    if view.decision:
        d = view.decision
        reason = f" ({d['reason']})" if d.get("reason") else ""
        lines.append(f"  decision      {d['decision']} by {d['by']} at {d['at']}{reason}")
        if d["decision"] == "edit":
            lines.append(f"  edited args   sha256 {d['args_sha256']}")
            lines.extend(_block(d["args"], "                  "))
    elif view.status == "pending":
        where = f" --url {url}" if url else " --url URL"
        lines.append(
            f"  to decide     tether approvals approve|reject|edit {r.approval_id}{where} "
            f"--by USER --args-sha256 {r.args_sha256}"
        )
    return "\n".join(lines)
