"""What a durable tool declares about undoing its effects, checked, and what its record keeps.

A tool with ``compensate=`` can be undone when a compensating run fails
(:mod:`tether.compensation` does the undoing). For that the tool's record
keeps, beside its result, the arguments it ran with; a tool declared
``read_only`` has no effect to undo, and its record says so. Records
written before this existed have no such entry and count as effects that
cannot be undone: tether never assumes an action did nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tether.steps._tools import DurableTool

__all__ = [
    "COMPENSATION_POLICIES",
    "Compensate",
    "CompensationPolicy",
    "check_compensation",
    "effect_entry",
]

CompensationPolicy = Literal["auto", "ask", "none"]
COMPENSATION_POLICIES: tuple[str, ...] = ("auto", "ask", "none")

Compensate = Callable[[dict[str, Any], Any, str], "Any | Awaitable[Any]"]
"""``compensate(args, result, idempotency_key)``: undo one effect (sync or async)."""


def check_compensation(compensate: Any, policy: Any, read_only: Any) -> str:
    """The tool's compensation policy (``""``: the run's), after checking the three options.

    Raises:
        TypeError: ``compensate`` is not callable, ``read_only`` is not a bool,
            or a read-only tool declares an undo.
        ValueError: An unknown policy, or ``"auto"``/``"ask"`` without ``compensate``.
    """
    if compensate is not None:
        _check_undo(compensate)
    if not isinstance(read_only, bool):
        raise TypeError(f"read_only must be True or False, got {read_only!r}")
    if read_only and compensate is not None:
        raise TypeError(
            "a read_only tool changes nothing, so it has nothing to compensate; "
            "drop compensate= or read_only=True"
        )
    if policy is None:
        return ""
    if policy not in COMPENSATION_POLICIES:
        raise ValueError(f"compensation must be 'auto', 'ask' or 'none', got {policy!r}")
    if policy != "none" and compensate is None:
        raise ValueError(
            f"compensation={policy!r} needs compensate=: the function that undoes the effect"
        )
    return str(policy)


_SIGNATURE = "compensate(args: dict, result, idempotency_key: str)"


def _check_undo(compensate: Any) -> None:
    """Refuse, when the tool is made, an undo that could never be called as one.

    A wrong signature would otherwise surface only when a run fails, as a
    failed undo put to a person; a generator function would return a
    generator, which nothing runs, recorded as undone.
    """
    if not callable(compensate):
        raise TypeError(
            f"compensate must be a callable {_SIGNATURE}, got {type(compensate).__name__}"
        )
    if inspect.isgeneratorfunction(compensate) or inspect.isasyncgenfunction(compensate):
        raise TypeError(
            f"compensate must return (or, async, return when awaited) its result, not yield: "
            f"{_name(compensate)} is a generator function; make it a {_SIGNATURE}"
        )
    try:
        signature = inspect.signature(compensate)
    except (TypeError, ValueError):  # a builtin without one: it is called and may fail then
        return
    try:
        signature.bind({}, None, "key")
    except TypeError as exc:
        raise TypeError(
            f"compensate is called as {_SIGNATURE}; {_name(compensate)}{signature} cannot be "
            f"({exc})"
        ) from None


def _name(function: Any) -> str:
    return str(getattr(function, "__qualname__", None) or type(function).__name__)


def effect_entry(tool: DurableTool, args: dict[str, Any]) -> dict[str, Any]:
    """What a committed call's record keeps for compensation (``None`` for a read-only tool)."""
    if tool.read_only:
        return {"effect": None}
    return {
        "effect": {
            "args": args,
            "undo": tool.compensate is not None,
            "policy": tool.compensation,
        }
    }
