"""Crash targets used only by the tests of the harness itself.

``gated_target`` is the demo's refund agent: the refund waits on a stored
approval request, which the harness's answer decides (an edit of the amount).
``careless_target`` is the refund agent without tether's durability: a plain
model and plain LangChain tools, the payments call made without an idempotency
key. The harness must catch what it does wrong after crashes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from tether.approvals import AlreadyDecidedError, decide, resume_decided
from tether.crashtest._target import CrashTarget, normalize_state
from tether.demo.graph import build_demo_graph
from tether.graphs._payments import FakePaymentsProvider
from tether.graphs._refund_scenario import (
    CALLS_FILE,
    DEMO_ORDERS,
    PAYMENTS_FILE,
    RefundState,
    refund_effects,
    refund_input,
    refund_script,
)
from tether.graphs._scripted import ScriptedChatModel
from tether.graphs.refund import crash_target


def _build_careless(checkpointer: BaseCheckpointSaver[Any], workdir: Path) -> Any:
    provider = FakePaymentsProvider(workdir / PAYMENTS_FILE)
    for order in DEMO_ORDERS:
        provider.add_order(order)

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order by id."""
        return json.dumps(asdict(provider.get_order(order_id)))

    @tool
    def issue_refund(order_id: str, amount_cents: int, reason: str) -> str:
        """Refund an order, with no idempotency key."""
        return json.dumps({**asdict(provider.refund(order_id, amount_cents)), "reason": reason})

    @tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email."""
        return json.dumps({"message_id": provider.send_email(to, subject, body), "to": to})

    tools = [lookup_order, issue_refund, send_email]
    model = ScriptedChatModel(rules=refund_script(), calls_file=str(workdir / CALLS_FILE))
    chat = model.bind_tools(tools)

    async def agent(state: RefundState) -> dict[str, Any]:
        return {"messages": [await chat.ainvoke(state["messages"])]}

    graph = StateGraph(RefundState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def careless_target() -> CrashTarget:
    return CrashTarget(
        build=_build_careless, input=refund_input(), effects=refund_effects, calls_file=CALLS_FILE
    )


not_a_target = 42


EDITED_CENTS = 2500


_DECIDING: ContextVar[bool] = ContextVar("_DECIDING", default=False)


def _resumed_by_decide(graph: Any) -> Any:
    """The demo's gated refund agent, resumed the way tether resumes a run that waits on a person.

    The approval gate only takes a decision that :func:`tether.approvals.decide`
    checked and stored; a bare ``Command(resume=...)`` does not approve anything.
    So the harness's resume becomes ``decide`` (store the decision, then resume
    the run), or ``resume_decided`` when an earlier process stored the decision
    and was killed before its resume finished. Everything else goes to the graph.

    The graph stays a compiled graph (its class gains this ``ainvoke``), so the
    harness can ask ``tether.unfinished`` about it; ``decide``'s own resume,
    made while ``_DECIDING`` is set, reaches LangGraph unchanged.
    """
    base = type(graph)

    async def ainvoke(self: Any, payload: Any, config: Any = None, **kwargs: Any) -> Any:
        answers = isinstance(payload, Command) and isinstance(payload.resume, dict)
        if _DECIDING.get() or not answers:
            return await base.ainvoke(self, payload, config, **kwargs)
        token = _DECIDING.set(True)
        try:
            for answer in payload.resume.values():
                try:
                    await decide(self.checkpointer, None, graph=self, **answer)
                except AlreadyDecidedError:
                    await resume_decided(self.checkpointer, answer["approval_id"], graph=self)
        finally:
            _DECIDING.reset(token)
        return None

    graph.__class__ = type("ResumedByDecide", (base,), {"ainvoke": ainvoke})
    return graph


def _edit_the_amount(request: dict[str, Any]) -> dict[str, Any]:
    """What dana decides on the refund request: a smaller amount, as in ``tether demo``."""
    return {
        "approval_id": request["approval_id"],
        "decision": "edit",
        "by": "dana",
        "args_sha256": request["args_sha256"],
        "edited_args": {**request["args"], "amount_cents": EDITED_CENTS},
        "reason": "partial refund agreed",
    }


# An approval id hashes the tool task's checkpoint namespace, whose task id comes
# from time-based checkpoint ids: a replay raises the same id, but two separate
# runs of the same conversation (the unkilled one, a crashed one) get different
# ids, and so do the scripted model's call ids for prompts that quote one.
_RUN_SPECIFIC_ID = re.compile(r"\b(?:apr_[0-9a-f]{24}|call_[0-9a-f]{12}_\d+)\b")


def _normalize_ids(values: Mapping[str, Any]) -> Any:
    """The usual comparison, with run-specific ids numbered in order of first appearance."""
    text = json.dumps(normalize_state(values), sort_keys=True)
    seen: dict[str, str] = {}
    numbered = _RUN_SPECIFIC_ID.sub(
        lambda m: seen.setdefault(m.group(), f"{m.group()[:4]}#{len(seen)}"), text
    )
    return json.loads(numbered)


def _build_gated(checkpointer: BaseCheckpointSaver[Any], workdir: Path) -> Any:
    return _resumed_by_decide(build_demo_graph(checkpointer=checkpointer, workdir=workdir))


def gated_target() -> CrashTarget:
    """The demo's refund agent: the refund waits on a stored approval, decided by ``decide``."""
    return CrashTarget(
        build=_build_gated,
        input=refund_input(),
        effects=refund_effects,
        calls_file=CALLS_FILE,
        answer=_edit_the_amount,
        normalize=_normalize_ids,
    )


def gated_target_without_answer() -> CrashTarget:
    return CrashTarget(
        build=lambda checkpointer, workdir: build_demo_graph(
            checkpointer=checkpointer, workdir=workdir
        ),
        input=refund_input(),
        effects=refund_effects,
    )


def exit_durability_target() -> CrashTarget:
    """The refund agent run with ``durability="exit"``: nothing is stored until the run ends.

    A killed run leaves no checkpoint, so the resume starts again from the input:
    its tasks get new ids, so its model calls are asked again and its durable tools
    run again under new idempotency keys (docs/steps.md). The harness must show it.
    """
    return replace(crash_target(), durability="exit")
