"""Start LangGraph's suite before the rest of the run, its slowest variants first."""

from __future__ import annotations

import pytest

# Slowest first (measured on two cores, beside the rest of the suite).
_BY_COST = ("postgres+enc", "postgres", "redis+enc", "redis", "sqlite+enc", "sqlite")


def _cost_rank(item: pytest.Item) -> int:
    callspec = getattr(item, "callspec", None)
    variant = callspec.params.get("variant") if callspec else None
    return _BY_COST.index(variant) if variant in _BY_COST else len(_BY_COST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each variant runs for minutes; one that pytest-xdist starts last leaves the other
    worker idle while it finishes, so they go to the front, longest first."""
    ours = [i for i in items if i.nodeid.startswith("tests/langgraph_suite/")]
    if ours:
        taken = set(ours)
        rest = [i for i in items if i not in taken]
        items[:] = sorted(ours, key=_cost_rank) + rest
