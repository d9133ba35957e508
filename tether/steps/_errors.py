"""The errors the wrapper node layer raises; each names the step and the fix."""

from __future__ import annotations

from typing import Any

from tether.errors import TetherError

__all__ = [
    "BudgetExceededError",
    "NonDeterminismError",
    "NotRecordedError",
    "ReconcileResultError",
    "RecordRaceError",
    "StepsError",
    "ToolOutcomeUnknownError",
    "VersionMismatchError",
]


class StepsError(TetherError):
    """Base class of the wrapper node layer's errors."""


class NonDeterminismError(StepsError):
    """A replayed call's input differs from the one recorded for the same step.

    Attributes:
        step: The step's record key (thread, namespace, task, call index).
        recorded_hash: The input hash stored when the step first ran.
        current_hash: The input hash of the call being replayed.
    """

    def __init__(self, step: str, recorded_hash: str, current_hash: str, what: str) -> None:
        self.step = step
        self.recorded_hash = recorded_hash
        self.current_hash = current_hash
        super().__init__(
            f"non-deterministic {what} at step {step!r}: the recorded input hash is "
            f"{recorded_hash} but this call's input hashes to {current_hash}. The node must "
            "make the same calls with the same inputs when it is replayed; move anything "
            "random or time-dependent into a recorded step, or fork the thread to change course"
        )


class RecordRaceError(StepsError):
    """Another worker recorded this step first, after this run's answer had moved on.

    Raised by the thread's next checkpoint write when a record write left in
    flight (an async node under ``durability="sync"``) finds the step already
    recorded: two processes ran the same node at once. The run stops before
    any write carrying this process's answer is saved; run the thread again and
    it replays the recorded answer.

    Attributes:
        kind: The record's kind (``model`` or ``tool``).
        key: The step's record key.
    """

    def __init__(self, kind: str, key: str) -> None:
        self.kind = kind
        self.key = key
        super().__init__(
            f"{kind} step {key!r} was recorded by another worker while this run's answer "
            "was being written; nothing of this run's step was saved. Two processes ran "
            "the same node at once: run the thread again and it replays the recorded answer"
        )


class NotRecordedError(StepsError):
    """A replay-only run reached a call that has no record.

    Debug replays (:mod:`tether.debug`) run with every answer taken from the
    log; a call without a record would ask the model or run the tool, so it
    stops here instead. It means the graph now makes a call the recorded run
    did not make.

    Attributes:
        step: The record key the call looked for.
    """

    def __init__(self, step: str, what: str) -> None:
        self.step = step
        super().__init__(
            f"replay-only run: no recorded {what} at step {step!r}; the recorded run made no "
            "such call, so the graph changed since (a replay never calls the model or runs a tool)"
        )


class ToolOutcomeUnknownError(StepsError):
    """A tool call started and nothing can tell whether its effect happened.

    Either its process died between claim and commit, or it raised an
    exception not declared as raised before any effect (a timeout is the
    typical case), and neither an idempotency key, ``safe_to_retry`` nor a
    reconcile hook makes running it again safe.

    Attributes:
        tool: The tool's name.
        step: The call's record key.
        error: The exception the earlier attempt raised (its type and message),
            or ``None`` when its process died.
        reason: Why a reconcile hook could not tell, if one was asked.
    """

    def __init__(
        self, tool: str, step: str, *, error: str | None = None, reason: str | None = None
    ) -> None:
        self.tool = tool
        self.step = step
        self.error = error
        self.reason = reason
        if reason is not None:
            super().__init__(
                f"tool {tool!r} (step {step!r}) started earlier and its outcome is unknown: "
                f"its reconcile hook cannot tell whether it happened ({reason or 'no reason'}). "
                "tether will not run it again; resume the run once the hook can tell"
            )
            return
        how = (
            f"raised {error} after it started"
            if error
            else "started before a crash and never finished"
        )
        fixes = (
            "Give it an idempotency_key parameter, a reconcile(args, key) hook that reads the "
            "outside world back, or declare it safe_to_retry=True if running it twice is harmless"
        )
        if error:
            fixes += (
                ", or durable_tool(..., raises_before_effect=(SomeError, ...)) if that "
                "exception type is only raised before any effect"
            )
        super().__init__(
            f"tool {tool!r} (step {step!r}) {how}, so its outcome is unknown: it takes no "
            "idempotency_key and declares no reconcile hook, so tether will not assume it "
            f"did not happen. {fixes}"
        )


class ReconcileResultError(StepsError, TypeError):
    """A reconcile hook returned something other than a ``ReconcileResult`` or ``None``.

    Nothing is committed and the tool does not run: the claim stays, so the
    next attempt asks the (fixed) hook again.
    """

    def __init__(self, tool: str, step: str, answer: object) -> None:
        self.tool = tool
        self.step = step
        self.answer = answer
        shown = repr(answer)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(
            f"the reconcile hook of tool {tool!r} (step {step!r}) returned "
            f"{type(answer).__name__} {shown}; it must return ReconcileResult(output) if the "
            "action happened, None if it did not, or ReconcileResult.unknown(reason) if it "
            "cannot tell. Nothing was recorded and the tool did not run"
        )


class VersionMismatchError(StepsError):
    """A run pinned to one version of the graph, prompt, model or tools resumed on another."""

    def __init__(self, thread_id: str, changes: dict[str, tuple[Any, Any]]) -> None:
        self.thread_id = thread_id
        self.changes = changes
        listed = "; ".join(f"{what}: {old!r} -> {new!r}" for what, (old, new) in changes.items())
        super().__init__(
            f"thread {thread_id!r} was started with other versions and its policy is 'pinned': "
            f"{listed}. Resume it with the versions it started with, or pin the graph with "
            "policy='migrate' to continue and record a version-change step"
        )


class BudgetExceededError(StepsError):
    """A run spent its budget and its policy is ``on_exceed="stop"``.

    The run ends here; its checkpointed state (``graph.get_state``) holds the
    partial result, and the step log ends with a ``budget`` step.
    """

    def __init__(self, root: str, spent: dict[str, float], limits: dict[str, Any]) -> None:
        self.root = root
        self.spent = spent
        self.limits = limits
        super().__init__(
            f"run {root!r} exceeded its budget (spent {spent}, limits {limits}) and its policy "
            "is 'stop'; its partial result is in the checkpointed state"
        )
