"""What compensating a run did: one outcome per effect, newest effect first."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["CompensationReport", "EffectOutcome", "EffectStatus"]

EffectStatus = Literal["undone", "not undone", "awaiting a person", "waiting"]


@dataclass(frozen=True)
class EffectOutcome:
    """One recorded effect of the run, and what became of it.

    Attributes:
        tool: The durable tool that had the effect.
        key: The effect's record key (its compensation is stored under the same key).
        step_index: The tool step in the thread's log (``None`` if it never finished).
        status: ``undone``; ``not undone`` (no ``compensate``, policy ``none``, an
            unknown outcome, or a person chose to leave it); ``awaiting a
            person`` (a request is open: ``approval_id``); ``waiting`` (a later
            effect awaits a person first: undoing goes strictly newest first).
        why: A sentence for the person reading the outcome.
        approval_id: The open or decided request, if any.
        args: The arguments the tool ran with (``None`` for old records).
        output: What the undo returned, for ``undone``.
    """

    tool: str
    key: str
    step_index: int | None
    status: EffectStatus
    why: str = ""
    approval_id: str | None = None
    args: dict[str, Any] | None = None
    output: Any = None


@dataclass(frozen=True)
class CompensationReport:
    """The outcome of compensating a thread's run.

    Attributes:
        thread_id: The thread.
        reason: Why the run is compensated (its error, a cancel).
        effects: One outcome per effect, in the order they were compensated
            (newest effect first).
    """

    thread_id: str
    reason: str
    effects: list[EffectOutcome] = field(default_factory=list)

    def _with(self, status: str) -> list[EffectOutcome]:
        return [e for e in self.effects if e.status == status]

    @property
    def undone(self) -> list[EffectOutcome]:
        """Effects undone."""
        return self._with("undone")

    @property
    def not_undone(self) -> list[EffectOutcome]:
        """Effects left in the world: a person must see them."""
        return self._with("not undone")

    @property
    def awaiting(self) -> list[EffectOutcome]:
        """Effects whose request waits on a person."""
        return self._with("awaiting a person")

    @property
    def complete(self) -> bool:
        """Every effect was dealt with: nothing waits on a person."""
        return all(e.status in ("undone", "not undone") for e in self.effects)

    def to_dict(self, *, args: bool = True) -> dict[str, Any]:
        """JSON form. ``args=False`` leaves the tools' arguments and undo outputs out
        (a run's error and events carry names and ids, not arguments)."""

        def effect(e: EffectOutcome) -> dict[str, Any]:
            found: dict[str, Any] = _jsonable(asdict(e))
            if not args:
                found.pop("args")
                found.pop("output")
            return found

        def listed(e: EffectOutcome, *names: str) -> dict[str, Any]:
            entry = {name: getattr(e, name) for name in ("tool", "step_index", *names, "why")}
            if args and e.status == "not undone":
                entry["args"] = _jsonable(e.args)
            return entry

        return {
            "thread_id": self.thread_id,
            "reason": self.reason,
            "complete": self.complete,
            "undone": [e.tool for e in self.undone],
            "not_undone": [listed(e) for e in self.not_undone],
            "awaiting": [listed(e, "approval_id") for e in self.awaiting],
            "effects": [effect(e) for e in self.effects],
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)
