"""The demo's refund agent: the reference refund agent with an approval gate on the refund.

The graph is :func:`tether.graphs.refund.build_refund_graph`; what the demo
adds is its approval policy, :func:`gate_refunds`: ``issue_refund`` above
:data:`APPROVAL_THRESHOLD_CENTS` waits for dana or a support lead, escalates to
a support manager after 24 hours, and stops 8 hours after that.

``demo_graph(checkpointer)`` is the factory ``tether approvals`` uses by
default (``--graph tether.demo.graph:demo_graph``). Its fake world (payments
database, model calls log) lives in ``$TETHER_DEMO_DIR`` (default
``./.tether/demo``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals import Approvers, Escalate, Stop, requires_approval
from tether.graphs import FakePaymentsProvider, build_refund_graph

__all__ = [
    "APPROVAL_THRESHOLD_CENTS",
    "DEMO_DIR_ENV",
    "build_demo_graph",
    "demo_dir",
    "demo_graph",
    "gate_refunds",
]

DEMO_DIR_ENV = "TETHER_DEMO_DIR"
APPROVAL_THRESHOLD_CENTS = 2000


def demo_dir() -> Path:
    """Where the demo's fake world lives: ``$TETHER_DEMO_DIR`` or ``./.tether/demo``."""
    return Path(os.environ.get(DEMO_DIR_ENV) or Path(".tether") / "demo").resolve()


def _order_version(provider: FakePaymentsProvider, order_id: str) -> str:
    order = asdict(provider.get_order(order_id))
    text = json.dumps(order, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gate_refunds(issue_refund: BaseTool, provider: FakePaymentsProvider) -> BaseTool:
    """``issue_refund`` behind a person's approval for refunds above the threshold."""
    return requires_approval(
        issue_refund,
        when=lambda args: int(args["amount_cents"]) > APPROVAL_THRESHOLD_CENTS,
        approvers=Approvers(users=["dana"], roles=["support-lead"]),
        expires_in=timedelta(hours=24),
        on_expiry=Escalate(
            to=Approvers(roles=["support-manager"]), expires_in=timedelta(hours=8), then=Stop()
        ),
        why=lambda a: (
            f"The customer reports order {a['order_id']} {a['reason']}; the agent proposes "
            f"refunding {a['amount_cents']} cents."
        ),
        affects=lambda a: (
            f"Moves {a['amount_cents']} cents back to the customer's card for order "
            f"{a['order_id']}; cannot be undone."
        ),
        if_denied="no money moves; the agent tells the customer the refund was not issued",
        observe=lambda a: {
            "order": asdict(provider.get_order(a["order_id"])),
            "refund_policy": "damaged items: up to the full order total, approval above "
            f"{APPROVAL_THRESHOLD_CENTS} cents",
        },
        depends_on={"order": lambda a: _order_version(provider, a["order_id"])},
    )


def build_demo_graph(*, checkpointer: BaseCheckpointSaver[Any], workdir: str | Path) -> Any:
    """The refund agent over ``checkpointer``, its fake world in ``workdir``, refunds gated.

    Returns:
        The compiled graph; its input is ``{"messages": [...]}``.
    """
    return build_refund_graph(checkpointer=checkpointer, workdir=workdir, gate_refund=gate_refunds)


def demo_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The default graph factory of ``tether approvals``: the demo agent in :func:`demo_dir`."""
    return build_demo_graph(checkpointer=checkpointer, workdir=demo_dir())
