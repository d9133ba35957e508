"""``compensating(graph, ...)``: the graph author's compensation policy, and where it is read.

The policy rides on the compiled graph's config, like a budget: runs of the
returned graph are compensating runs. Each effect's policy is, in this order:

1. the run's own, ``config["configurable"]["tether_compensation"]``
   (``"auto"``, ``"ask"`` or ``"none"``), when the run gives one;
2. the tool's own (``durable_tool(..., compensation=...)``);
3. the graph's (``compensating(graph, policy=...)``, default ``"auto"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from langchain_core.tools import BaseTool

from tether.approvals import Approvers
from tether.compensation.errors import CompensationConfigError
from tether.steps import DurableTool

__all__ = [
    "RUN_POLICY_KEY",
    "SETTINGS_KEY",
    "Compensation",
    "compensating",
    "run_policy",
    "settings_of",
]

G = TypeVar("G")

SETTINGS_KEY = "__tether_compensation"
RUN_POLICY_KEY = "tether_compensation"
_POLICIES = ("auto", "ask", "none")


def _policy(value: Any, where: str) -> str:
    if value not in _POLICIES:
        raise CompensationConfigError(f"{where} must be 'auto', 'ask' or 'none', got {value!r}")
    return str(value)


@dataclass(frozen=True)
class Compensation:
    """A graph's compensation settings (see :func:`compensating`)."""

    approvers: Approvers
    policy: str = "auto"
    expires_in: timedelta = timedelta(days=7)
    tools: tuple[DurableTool, ...] = ()

    def tools_by_name(self, graph: Any) -> dict[str, DurableTool]:
        """Durable tools found in the graph's tool nodes, then those given explicitly."""
        found: dict[str, DurableTool] = {}
        for node in getattr(graph, "nodes", {}).values():
            bound = getattr(node, "bound", None)
            for tool in (getattr(bound, "tools_by_name", None) or {}).values():
                durable = _durable(tool)
                if durable is not None:
                    found[durable.name] = durable
        found.update({t.name: t for t in self.tools})
        return found


def _durable(tool: Any) -> DurableTool | None:
    """The durable tool inside ``tool`` (an approval gate wraps one in ``inner``)."""
    for _ in range(8):
        if isinstance(tool, DurableTool):
            return tool
        tool = getattr(tool, "inner", None)
        if not isinstance(tool, BaseTool):
            return None
    return None


def compensating(
    graph: G,
    *,
    approvers: Approvers,
    policy: str = "auto",
    expires_in: timedelta = timedelta(days=7),
    tools: tuple[BaseTool, ...] | list[BaseTool] = (),
) -> G:
    """A copy of the compiled ``graph`` whose failed runs are compensated.

    Args:
        graph: A compiled LangGraph graph.
        approvers: Who decides when a compensation fails, or (policy ``"ask"``)
            before one runs.
        policy: ``"auto"`` (undo each effect), ``"ask"`` (ask a person before
            each undo) or ``"none"`` (undo nothing; list the effects). Tools and
            runs may say otherwise (see the module docstring).
        expires_in: How long a person has to decide; an expired request leaves
            the effect not undone (a timeout never undoes, nor approves).
        tools: Durable tools with ``compensate=`` that are not in one of the
            graph's ``ToolNode``s (which are found by themselves).

    Raises:
        CompensationConfigError: No approvers, an unknown policy, a bad expiry,
            a tool that is not durable, or a graph that is not compiled.
    """
    if not isinstance(approvers, Approvers):
        raise CompensationConfigError(
            "compensating() needs approvers=Approvers(users=[...], roles=[...]): a "
            "compensation that fails goes to them"
        )
    if not isinstance(expires_in, timedelta) or expires_in <= timedelta(0):
        raise CompensationConfigError(
            f"expires_in must be a positive timedelta, got {expires_in!r}"
        )
    given = tuple(tools)
    for tool in given:
        if _durable(tool) is None:
            raise CompensationConfigError(
                f"tools= takes durable tools (tether.steps.durable_tool), got {tool!r}"
            )
    if not callable(getattr(graph, "with_config", None)):
        raise CompensationConfigError(
            f"compensating() takes a compiled graph (builder.compile(...)), got "
            f"{type(graph).__name__}"
        )
    settings = Compensation(
        approvers=approvers,
        policy=_policy(policy, "compensating(policy=...)"),
        expires_in=expires_in,
        tools=tuple(d for d in map(_durable, given) if d is not None),
    )
    configured: G = graph.with_config(configurable={SETTINGS_KEY: settings})  # type: ignore[attr-defined]
    return configured


def settings_of(graph: Any) -> Compensation | None:
    """The graph's compensation settings, or ``None`` for a graph that does not compensate."""
    config = getattr(graph, "config", None) or {}
    found = (config.get("configurable") or {}).get(SETTINGS_KEY)
    return found if isinstance(found, Compensation) else None


def run_policy(config: Any) -> str | None:
    """The run's own policy (``tether_compensation`` in its configurable), if it gives one."""
    value = ((config or {}).get("configurable") or {}).get(RUN_POLICY_KEY)
    if value is None:
        return None
    return _policy(value, f"configurable {RUN_POLICY_KEY!r}")
