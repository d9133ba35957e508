"""Bad compensation settings fail at once, with an error naming the problem."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.compensation.saga import APPROVERS, CONFIG, World, saga_graph
from tests.steps.graphs import one_node
from tether import open_checkpointer
from tether.compensation import (
    CompensationConfigError,
    compensate,
    compensate_sync,
    compensating,
)
from tether.errors import ConfigurationError
from tether.steps import durable_tool


def charge(order_id: str) -> str:
    """Charge."""
    return order_id


def undo(args: dict[str, Any], result: Any, key: str) -> None:
    return None


def test_compensate_must_be_callable() -> None:
    with pytest.raises(TypeError, match=r"compensate must be a callable compensate\(args"):
        durable_tool(charge, compensate="refund")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [lambda: None, lambda args, result: None, lambda args, result, key, extra: None],
    ids=["no arguments", "two", "four"],
)
def test_an_undo_that_cannot_take_args_result_and_key_is_refused_when_the_tool_is_made(
    bad: Any,
) -> None:
    """Not when a run fails, as an undo that fails and is put to a person."""
    with pytest.raises(TypeError, match=r"compensate is called as compensate\(args.*<lambda>\("):
        durable_tool(charge, compensate=bad)


def test_an_undo_that_yields_is_refused() -> None:
    """A generator's result is a generator nothing runs: it would be recorded as undone."""

    def refund(args: dict[str, Any], result: Any, key: str) -> Any:
        yield key

    async def refund_async(args: dict[str, Any], result: Any, key: str) -> Any:
        yield key

    for bad in (refund, refund_async):
        with pytest.raises(TypeError, match="is a generator function"):
            durable_tool(charge, compensate=bad)


def test_undos_of_every_callable_shape_are_accepted() -> None:
    class Refund:
        def __call__(self, args: dict[str, Any], result: Any, key: str) -> None:
            return None

    async def refund(args: dict[str, Any], result: Any, key: str) -> None:
        return None

    for good in (undo, refund, Refund(), lambda *parts: None, lambda a, r, k=None: None):
        assert durable_tool(charge, compensate=good).compensate is good


def test_an_unknown_tool_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="compensation must be 'auto', 'ask' or 'none', got 'yes'"):
        durable_tool(charge, compensate=undo, compensation="yes")  # type: ignore[arg-type]


def test_auto_or_ask_without_an_undo_is_refused() -> None:
    with pytest.raises(ValueError, match="compensation='ask' needs compensate="):
        durable_tool(charge, compensation="ask")


def test_a_read_only_tool_has_nothing_to_undo() -> None:
    with pytest.raises(TypeError, match="a read_only tool changes nothing"):
        durable_tool(charge, compensate=undo, read_only=True)
    with pytest.raises(TypeError, match="read_only must be True or False"):
        durable_tool(charge, read_only="yes")  # type: ignore[arg-type]


def test_compensating_needs_approvers_a_policy_and_durable_tools() -> None:
    graph = one_node(lambda state: state, None)
    with pytest.raises(CompensationConfigError, match="needs approvers=Approvers"):
        compensating(graph, approvers=["dana"])  # type: ignore[arg-type]
    with pytest.raises(CompensationConfigError, match=r"compensating\(policy=\.\.\.\) must be"):
        compensating(graph, approvers=APPROVERS, policy="always")
    with pytest.raises(CompensationConfigError, match="expires_in must be a positive timedelta"):
        compensating(graph, approvers=APPROVERS, expires_in=timedelta(0))
    with pytest.raises(CompensationConfigError, match="tools= takes durable tools"):
        compensating(graph, approvers=APPROVERS, tools=[charge])  # type: ignore[list-item]
    with pytest.raises(CompensationConfigError, match="takes a compiled graph"):
        compensating(object(), approvers=APPROVERS)
    assert issubclass(CompensationConfigError, ConfigurationError)


async def test_compensate_refuses_a_graph_a_config_or_a_run_policy_it_cannot_use(
    tmp_path: Path,
) -> None:
    world = World(tmp_path / "world.db")
    async with open_checkpointer(f"sqlite:///{tmp_path / 'c.db'}") as saver:
        graph = saga_graph(saver, world)
        plain = one_node(lambda state: state, saver)
        with pytest.raises(CompensationConfigError, match="this graph does not compensate"):
            await compensate(plain, CONFIG, reason="x")
        with pytest.raises(CompensationConfigError, match="needs the run's config"):
            await compensate(graph, {"configurable": {}}, reason="x")
        with pytest.raises(CompensationConfigError, match="reason= must be a non-empty"):
            await compensate(graph, CONFIG, reason="")
        bad = {"configurable": {"thread_id": "saga", "tether_compensation": "maybe"}}
        with pytest.raises(CompensationConfigError, match="'tether_compensation' must be 'auto'"):
            await compensate(graph, bad, reason="x")
    no_saver = compensating(one_node(lambda state: state, None), approvers=APPROVERS)
    with pytest.raises(CompensationConfigError, match="needs the graph's checkpointer"):
        compensate_sync(no_saver, CONFIG, reason="x")
