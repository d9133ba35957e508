"""Run budgets: token and cost limits that cover the whole run, resumes included.

``with_budget(graph, Budget(...))`` returns a copy of a compiled graph whose
recorded model calls are charged to the run. Spend lives in records keyed by
the run's root thread (``tether_root_thread_id`` in the config, else the
thread), so a resume, a retry or a fork that names the same root continues
the same budget instead of getting a fresh one. Limits are recorded when the
run first spends; later code changes do not reset them, only an extension does.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from langgraph.types import interrupt

from tether._instances import instance_key
from tether.steps._errors import BudgetExceededError
from tether.steps._log import scope_step
from tether.steps._scope import BUDGET_KEY, NodeScope
from tether.store import on_forget

__all__ = ["Budget", "Ledger", "Price", "drop_thread", "with_budget"]

G = TypeVar("G")


@dataclass(frozen=True)
class Price:
    """What a model charges, in US dollars per million tokens."""

    input_per_million: float
    output_per_million: float

    def cost(self, usage: dict[str, int]) -> float:
        return (
            usage.get("input_tokens", 0) * self.input_per_million
            + usage.get("output_tokens", 0) * self.output_per_million
        ) / 1_000_000


@dataclass(frozen=True)
class Budget:
    """Limits on what a run may spend.

    Args:
        max_tokens: Total tokens (input + output) over the whole run.
        max_cost_usd: Total cost over the whole run (models need a ``price``).
        on_exceed: ``"pause"`` (default) interrupts the run and asks a person
            to extend the budget: resume with
            ``Command(resume={"max_tokens": ..., "max_cost_usd": ...})``.
            ``"stop"`` ends the run with :class:`BudgetExceededError`; its
            checkpointed state holds the partial result.
    """

    max_tokens: int | None = None
    max_cost_usd: float | None = None
    on_exceed: Literal["pause", "stop"] = "pause"

    def __post_init__(self) -> None:
        if self.max_tokens is None and self.max_cost_usd is None:
            raise ValueError("Budget needs max_tokens, max_cost_usd or both")
        for name in ("max_tokens", "max_cost_usd"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value <= 0):
                raise ValueError(f"Budget {name} must be a positive number, got {value!r}")
        if self.on_exceed not in ("pause", "stop"):
            raise ValueError(f"Budget on_exceed must be 'pause' or 'stop', got {self.on_exceed!r}")

    def limits(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "max_cost_usd": self.max_cost_usd}


def with_budget(graph: G, budget: Budget) -> G:
    """A copy of the compiled ``graph`` whose runs are held to ``budget``."""
    if not isinstance(budget, Budget):
        raise TypeError(f"with_budget() needs a tether Budget, got {type(budget).__name__}")
    configured: G = graph.with_config(configurable={BUDGET_KEY: budget})  # type: ignore[attr-defined]
    return configured


@dataclass
class Ledger:
    """A run's limits and spend, as this process knows them."""

    root: str
    limits: dict[str, Any]
    tokens: int = 0
    cost_usd: float = 0.0

    def spent(self) -> dict[str, float]:
        return {"tokens": self.tokens, "cost_usd": round(self.cost_usd, 6)}

    def exceeded(self) -> bool:
        max_tokens, max_cost = self.limits.get("max_tokens"), self.limits.get("max_cost_usd")
        return bool(
            (max_tokens is not None and self.tokens >= max_tokens)
            or (max_cost is not None and self.cost_usd >= max_cost)
        )


# Least recently used last: a long-lived worker sees every thread once, so the
# cache is bounded like ``known``'s (records stay the truth; an evicted ledger is
# read again).
_MAX_LEDGERS = 1024
_ledgers: OrderedDict[tuple[int, str], Ledger] = OrderedDict()
_ledgers_lock = threading.Lock()


def _forget_ledgers(threads: frozenset[str] | None) -> None:
    """Drop cached ledgers whose records were deleted (all of them if unknown)."""
    with _ledgers_lock:
        for key in [k for k in _ledgers if threads is None or k[1] in threads]:
            del _ledgers[key]


on_forget(_forget_ledgers)


def drop_thread(thread_id: str) -> None:
    """Drop the cached ledger of the run rooted at ``thread_id`` (under every store)."""
    _forget_ledgers(frozenset((thread_id,)))


async def ledger_for(scope: NodeScope) -> Ledger | None:
    """The run's ledger, read from the records once per process; ``None`` without a budget."""
    budget = scope.configurable.get(BUDGET_KEY)
    if not isinstance(budget, Budget):
        return None
    cache_key = (instance_key(scope.store), scope.root)
    with _ledgers_lock:
        ledger = _ledgers.get(cache_key)
        if ledger is not None:
            _ledgers.move_to_end(cache_key)
            return ledger
    store = scope.store
    await store.insert("budget", scope.root, budget.limits(), thread_id=scope.root)
    record = await store.get("budget", scope.root)
    ledger = Ledger(scope.root, record.value if record else budget.limits())
    for spend in await store.list("spend", thread_id=scope.root):
        ledger.tokens += int(spend.value.get("tokens", 0))
        ledger.cost_usd += float(spend.value.get("cost_usd", 0.0))
    with _ledgers_lock:
        ledger = _ledgers.setdefault(cache_key, ledger)
        while len(_ledgers) > _MAX_LEDGERS:
            _ledgers.popitem(last=False)
        return ledger


async def charge(scope: NodeScope, ledger: Ledger, key: str, tokens: int, cost: float) -> None:
    """Charge one recorded call to the run (once, however often it is replayed)."""
    if await scope.store.insert(
        "spend", f"{ledger.root}|{key}", {"tokens": tokens, "cost_usd": cost}, thread_id=ledger.root
    ):
        with _ledgers_lock:
            ledger.tokens += tokens
            ledger.cost_usd += cost


async def record_exceeded(scope: NodeScope, ledger: Ledger, key: str) -> None:
    """Append the ``budget`` step that says the run hit its limits (once per ``key``)."""
    budget = _budget(scope)
    if await scope.store.insert(
        "budget-event", f"{key}|exceeded", ledger.spent(), thread_id=scope.thread_id
    ):
        await scope.store.append_step(
            scope.thread_id,
            scope_step(
                scope,
                "budget",
                "exceeded",
                detail={
                    "spent": ledger.spent(),
                    "limits": ledger.limits,
                    "policy": budget.on_exceed,
                },
            ),
        )


def _budget(scope: NodeScope) -> Budget:
    budget: Budget = scope.configurable[BUDGET_KEY]
    return budget


def ask_for_more(
    scope: NodeScope, ledger: Ledger, problem: str | None
) -> tuple[dict[str, Any] | None, str | None]:
    """Stop, or pause for a person; returns the new limits, or why the answer was refused.

    Must run in the node's own context: ``interrupt()`` reads it.

    Raises:
        BudgetExceededError: The policy is ``"stop"``.
    """
    if _budget(scope).on_exceed == "stop":
        raise BudgetExceededError(ledger.root, ledger.spent(), ledger.limits)
    request: dict[str, Any] = {
        "tether": "budget",
        "run": ledger.root,
        "spent": ledger.spent(),
        "limits": ledger.limits,
        "resume_with": "Command(resume={'max_tokens': <int>, 'max_cost_usd': <float>})",
    }
    if problem:
        request["problem"] = problem
    resume = interrupt(request)
    if not isinstance(resume, dict) or not ({"max_tokens", "max_cost_usd"} & resume.keys()):
        return None, (
            f"resume a budget pause with a dict of new limits, e.g. "
            f"Command(resume={{'max_tokens': 20000}}); got {resume!r}"
        )
    limits = {
        **ledger.limits,
        **{k: resume[k] for k in ("max_tokens", "max_cost_usd") if k in resume},
    }
    try:
        Budget(**limits)
    except (TypeError, ValueError) as exc:
        return None, str(exc)
    return limits, None


async def extend(scope: NodeScope, ledger: Ledger, limits: dict[str, Any], key: str) -> None:
    """Store a person's new limits for the whole run and log them (once per ``key``)."""
    await scope.store.upsert("budget", ledger.root, limits, thread_id=ledger.root)
    with _ledgers_lock:
        ledger.limits = limits
    if await scope.store.insert(
        "budget-event", f"{key}|extended", limits, thread_id=scope.thread_id
    ):
        await scope.store.append_step(
            scope.thread_id,
            scope_step(
                scope,
                "budget",
                "extended",
                detail={"spent": ledger.spent(), "limits": limits},
            ),
        )
