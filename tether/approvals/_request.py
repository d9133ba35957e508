"""Asking a person: ``request_approval`` in a node, and ``requires_approval`` around a tool.

:func:`request_approval` is called inside a graph node at the step itself. The
request is stored, then a LangGraph ``interrupt`` pauses the run; no thread or
process waits. When a decision arrives (``decide``), LangGraph re-runs the node
and the same call returns an :class:`ApprovalOutcome`. The protocol is
:func:`._flow.approval_flow`; the sync and async entry points only differ in
the runner that performs its operations.

:func:`requires_approval` wraps a tool so that it asks a person first, when its
risk policy says so. The gated tool keeps the wrapped tool's name, description
and argument schema, so the model sees the same tool. When ``when(args)`` holds
it calls ``request_approval`` keyed by the tool call id, then:

* approve: runs the tool with the approved arguments;
* edit: runs it with the edited arguments; the result carries an ``approval``
  note saying what changed, so the agent learns of the edit;
* reject: does not run it; the result is a JSON observation with the reason,
  so the agent adapts instead of retrying;
* expired, ``SafeAlternative``: runs the proposed alternative;
* expired, ``Stop``: does not run it; the result is a ``ToolMessage`` whose
  artifact marks the stop (route on :func:`stopped_by_expiry` to end the run).

Dispatch parallel tool calls as separate tasks (``Send``, as ``create_agent``
does), so each pending approval is its own interrupt.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from pydantic import BaseModel, ConfigDict

from tether._tool_calls import current_tool_call_id, running_tool_call
from tether.approvals._checks import register_args_schema
from tether.approvals._flow import (
    ApprovalOutcome,
    ApprovalSpec,
    Observations,
    Reader,
    StepContext,
    approval_flow,
    make_spec,
    step_context,
)
from tether.approvals._io import run, run_sync
from tether.approvals._policies import Alternative, Approvers, ExpiryPolicy, expiry_policy
from tether.approvals.errors import ApprovalConfigError
from tether.store import RecordStore, store_for

__all__ = [
    "ApprovalGatedTool",
    "arequest_approval",
    "request_approval",
    "requires_approval",
    "stopped_by_expiry",
]


def _start(
    kwargs: dict[str, Any], config: RunnableConfig | None
) -> tuple[ApprovalSpec, StepContext, RecordStore]:
    """The validated call, where it runs, and the store of the graph it runs in."""
    spec = make_spec(**kwargs)
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # outside any runnable: step_context names the fix
            config = {}
    ctx = step_context(config)
    return spec, ctx, store_for(ctx.checkpointer)


def request_approval(
    action: str,
    args: Mapping[str, Any] | BaseModel,
    *,
    why: str,
    approvers: Approvers,
    expires_in: timedelta,
    on_expiry: ExpiryPolicy | str,
    affects: str = "",
    if_denied: str = "",
    observations: Observations | None = None,
    depends_on: Mapping[str, Reader] | None = None,
    alternative: Alternative | None = None,
    args_schema: type[BaseModel] | None = None,
    key: str | None = None,
    config: RunnableConfig | None = None,
) -> ApprovalOutcome:
    """Ask a person to decide on ``action(args)``; pauses the run until they do.

    Call it inside a sync node or tool. Use :func:`arequest_approval` in async code.

    Args:
        action: The action's name, e.g. ``"issue_refund"``.
        args: The resolved arguments (hashed with SHA-256 over canonical JSON).
        why: Why the agent wants to do it.
        approvers: Who may decide.
        expires_in: How long the request stays open (every request expires).
        on_expiry: ``Escalate(...)``, ``Stop()``/``"stop"`` or
            ``SafeAlternative()``/``"safe_alternative"``; never approve.
        affects: What the action changes (accounts, people, money).
        if_denied: What happens if it is rejected.
        observations: What the agent saw, shown to the approver: a dict, or a
            callable returning one (called again for a fresh request after a
            stale approval).
        depends_on: Named readers returning the current version of each record
            the action depends on; re-read just before the action runs.
        alternative: A safer action to take if the request expires under
            ``SafeAlternative``.
        args_schema: The pydantic model the arguments follow; edits are
            validated against it.
        key: Distinguishes several identical requests in one node.
        config: The node's config (found automatically inside a node).

    Returns:
        The settled :class:`ApprovalOutcome`.

    Raises:
        GraphInterrupt: (LangGraph's) the run pauses until a decision.
        ApprovalConfigError: Bad configuration (missing approvers, approve-on-timeout...).
    """
    spec, ctx, store = _start({k: v for k, v in locals().items() if k != "config"}, config)
    return run_sync(approval_flow(spec, ctx, store.sync.keyed_hash()), store)


async def arequest_approval(
    action: str,
    args: Mapping[str, Any] | BaseModel,
    *,
    why: str,
    approvers: Approvers,
    expires_in: timedelta,
    on_expiry: ExpiryPolicy | str,
    affects: str = "",
    if_denied: str = "",
    observations: Observations | None = None,
    depends_on: Mapping[str, Callable[[], Any | Awaitable[Any]]] | None = None,
    alternative: Alternative | None = None,
    args_schema: type[BaseModel] | None = None,
    key: str | None = None,
    config: RunnableConfig | None = None,
) -> ApprovalOutcome:
    """Async twin of :func:`request_approval`; readers and observations may be async."""
    spec, ctx, store = _start({k: v for k, v in locals().items() if k != "config"}, config)
    return await run(approval_flow(spec, ctx, await store.keyed_hash()), store)


# -- gating a tool -------------------------------------------------------------------------
ArgsFn = Callable[[dict[str, Any]], Any]
STOP_ARTIFACT = "tether_approval_stop"


def _text(value: str | ArgsFn, args: dict[str, Any]) -> str:
    return str(value(args)) if callable(value) else value


def _annotate(result: Any, outcome: ApprovalOutcome) -> Any:
    """Attach the approval note to a tool result the agent will read."""
    if outcome.decision == "approve":
        return result
    note = outcome.to_dict()
    if isinstance(result, dict):
        return {**result, "approval": note}
    if isinstance(result, str):
        try:
            parsed = json.loads(result)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return json.dumps({**parsed, "approval": note})
        return f"{outcome.observation}\n{result}"
    return result


def stopped_by_expiry(messages: Sequence[BaseMessage]) -> bool:
    """Whether the latest tool results include an expired approval whose policy is stop."""
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        if isinstance(message.artifact, dict) and message.artifact.get(STOP_ARTIFACT):
            return True
    return False


class ApprovalGatedTool(BaseTool):
    """A tool wrapped by :func:`requires_approval` (see the module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool
    approvers: Approvers | Callable[[dict[str, Any]], Approvers]
    expires_in: timedelta
    on_expiry: Any
    why: Any
    affects: Any = ""
    if_denied: Any = ""
    when: Callable[[dict[str, Any]], bool] | None = None
    observe: Callable[[dict[str, Any]], Any] | None = None
    depends_on: Mapping[str, Callable[[dict[str, Any]], Any]] = {}
    alternative: Callable[[dict[str, Any]], Alternative | None] | None = None
    alternative_tools: Sequence[BaseTool] = ()

    # -- tool call id: keyed approvals -------------------------------------------------
    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the tool (capturing the tool call id that keys the approval)."""
        with running_tool_call(input):
            return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Async twin of :meth:`invoke`."""
        with running_tool_call(input):
            return await super().ainvoke(input, config, **kwargs)

    # -- the gate ----------------------------------------------------------------------
    def _gate_kwargs(self, args: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        approvers = self.approvers(args) if callable(self.approvers) else self.approvers
        schema = self.inner.args_schema
        return {
            "why": _text(self.why, args),
            "affects": _text(self.affects, args),
            "if_denied": _text(self.if_denied, args),
            "approvers": approvers,
            "expires_in": self.expires_in,
            "on_expiry": self.on_expiry,
            "observations": (lambda: self.observe(args)) if self.observe else None,
            "depends_on": {k: _bind(r, args) for k, r in self.depends_on.items()},
            "alternative": self.alternative(args) if self.alternative else None,
            "args_schema": schema if isinstance(schema, type) else None,
            "config": config,
        }

    def _target(self, outcome: ApprovalOutcome) -> BaseTool:
        if outcome.action == self.name:
            return self.inner
        for tool in self.alternative_tools:
            if tool.name == outcome.action:
                return tool
        raise ApprovalConfigError(
            f"the alternative action {outcome.action!r} of {self.name!r} is not a tool the gate "
            "knows; pass it in alternative_tools=[...]"
        )

    def _settled(self, outcome: ApprovalOutcome) -> Any:
        body = json.dumps({"status": outcome.decision, **outcome.to_dict()})
        if outcome.stop:
            return ToolMessage(
                content=body,
                tool_call_id=current_tool_call_id() or outcome.approval_id,
                name=self.name,
                artifact={STOP_ARTIFACT: True, "approval_id": outcome.approval_id},
            )
        return body

    def _run(self, config: RunnableConfig, **kwargs: Any) -> Any:
        if self.when is not None and not self.when(kwargs):
            return self.inner.invoke(kwargs, config)
        outcome = request_approval(self.name, kwargs, **self._gate_kwargs(kwargs, config))
        if outcome.args is None:
            return self._settled(outcome)
        return _annotate(self._target(outcome).invoke(outcome.args, config), outcome)

    async def _arun(self, config: RunnableConfig, **kwargs: Any) -> Any:
        if self.when is not None and not self.when(kwargs):
            return await self.inner.ainvoke(kwargs, config)
        outcome = await arequest_approval(self.name, kwargs, **self._gate_kwargs(kwargs, config))
        if outcome.args is None:
            return self._settled(outcome)
        return _annotate(await self._target(outcome).ainvoke(outcome.args, config), outcome)


def _bind(reader: Callable[[dict[str, Any]], Any], args: dict[str, Any]) -> Callable[[], Any]:
    return lambda: reader(args)


def requires_approval(
    tool: BaseTool,
    *,
    approvers: Approvers | Callable[[dict[str, Any]], Approvers],
    why: str | ArgsFn,
    expires_in: timedelta,
    on_expiry: ExpiryPolicy | str,
    when: Callable[[dict[str, Any]], bool] | None = None,
    affects: str | ArgsFn = "",
    if_denied: str | ArgsFn = "",
    observe: Callable[[dict[str, Any]], Any] | None = None,
    depends_on: Mapping[str, Callable[[dict[str, Any]], Any]] | None = None,
    alternative: Callable[[dict[str, Any]], Alternative | None] | None = None,
    alternative_tools: Sequence[BaseTool] = (),
) -> ApprovalGatedTool:
    """Wrap ``tool`` so it needs a person's approval when ``when(args)`` holds (default: always).

    Args:
        tool: The tool (its ``args_schema`` validates edits).
        approvers: Who may decide, or a function of the arguments returning it.
        why: Why the agent wants this (text, or a function of the arguments).
        expires_in: How long a request stays open.
        on_expiry: ``Escalate(...)``, ``Stop()`` or ``SafeAlternative()``.
        when: The risk policy: a predicate on the arguments.
        affects: What the action changes.
        if_denied: What happens if it is rejected.
        observe: The observations shown to the approver, from the arguments.
        depends_on: Readers (taking the arguments) of the versions of the records
            the action depends on; a change voids the approval.
        alternative: The safe alternative to propose, from the arguments.
        alternative_tools: Tools an alternative may name besides this one.

    Raises:
        ApprovalConfigError: A bad policy (approve-on-timeout, a non-positive expiry...).
    """
    expiry_policy(on_expiry)  # fail at build time, not at the first risky call
    if not isinstance(expires_in, timedelta) or expires_in <= timedelta(0):
        raise ApprovalConfigError(f"expires_in must be a positive timedelta, got {expires_in!r}")
    schema = tool.args_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        register_args_schema(tool.name, schema)
    return ApprovalGatedTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        inner=tool,
        approvers=approvers,
        expires_in=expires_in,
        on_expiry=on_expiry,
        why=why,
        affects=affects,
        if_denied=if_denied,
        when=when,
        observe=observe,
        depends_on=dict(depends_on or {}),
        alternative=alternative,
        alternative_tools=list(alternative_tools),
    )
