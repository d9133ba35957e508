"""A durable tool that raised after (or before) its effect: what the next run may do.

The typical case is a timeout: the payment went through, then the client gave
up waiting and raised. The record says the attempt failed, but nobody knows
whether the effect happened, so a resumed run must treat it like a claim whose
process died: reconcile, or refuse. It may run the tool again only when that is
known to be safe (an idempotency key, ``safe_to_retry``, or an exception type
declared as raised before any effect).

The outside world is a SQLite file the tool writes its effect to; the checkpoints
and records are on the real backend under test, and every resume reopens the
checkpointer, as a new worker would.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from tests.backends import Backend
from tests.steps.graphs import State, one_node
from tether.steps import ReconcileResult, ToolOutcomeUnknownError, durable_tool, read_steps

CONFIG: Any = {"configurable": {"thread_id": "t-fail"}}


class InvalidOrderError(Exception):
    """The payments API refused the request before doing anything."""


class World:
    """The outside world: a SQLite file of refunds the tool made."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS refunds (order_id TEXT, key TEXT)")

    def refund(self, order_id: str, key: str = "-") -> None:
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO refunds VALUES (?, ?)", (order_id, key))

    def refunds(self) -> list[tuple[str, str]]:
        with sqlite3.connect(self.path) as db:
            return list(db.execute("SELECT order_id, key FROM refunds ORDER BY rowid"))


def _graph(tool: Any, saver: Any) -> Any:
    async def node(state: State) -> dict[str, Any]:
        return {"messages": [HumanMessage(str(await tool.ainvoke({"order_id": "A1"})))]}

    return one_node(node, saver)


async def _fail_then_resume(backend: Backend, make_tool: Any) -> Any:
    """Run until the tool raises; then resume in a freshly opened checkpointer."""
    async with backend.open() as saver:
        with pytest.raises((TimeoutError, InvalidOrderError)):
            await _graph(make_tool(), saver).ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
    async with backend.open() as saver:
        result = await _graph(make_tool(), saver).ainvoke(None, CONFIG)
        steps = await read_steps(saver, "t-fail")
    return result, steps


def _times_out_after_refund(world: World, **options: Any) -> Any:
    attempts = {"n": 0}

    @durable_tool(name="refund", **options)
    def refund(order_id: str) -> str:
        """Refund an order."""
        attempts["n"] += 1
        world.refund(order_id)  # the effect happens...
        if attempts["n"] == 1:
            raise TimeoutError("payments API did not answer in 10 s")  # ...then the client gives up
        return f"refunded {order_id}"

    return refund


def _fails_first_before_refund(world: World, error: Exception, **options: Any) -> Any:
    """A refund tool whose first attempt raises ``error`` before any effect; counts attempts."""
    attempts = {"n": 0}

    @durable_tool(name="refund", **options)
    def refund(order_id: str) -> str:
        """Refund an order."""
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise error
        world.refund(order_id)
        return f"refunded {order_id}"

    return refund, attempts


async def test_a_tool_that_raised_after_its_effect_is_not_run_again(
    durable_backend: Backend, tmp_path: Path
) -> None:
    world = World(tmp_path / "world.db")
    tool_factory = _fresh_each_time(lambda: _times_out_after_refund(world))
    with pytest.raises(ToolOutcomeUnknownError) as refused:
        await _fail_then_resume(durable_backend, tool_factory)
    assert world.refunds() == [("A1", "-")]  # one refund: the resume did not repeat it
    message = str(refused.value)
    assert "TimeoutError" in message
    assert "raises_before_effect" in message
    assert refused.value.tool == "refund"


async def test_reconcile_reads_back_the_effect_of_a_failed_attempt(
    durable_backend: Backend, tmp_path: Path
) -> None:
    world = World(tmp_path / "world.db")
    asked: list[dict[str, Any]] = []

    def reconcile(args: dict[str, Any], key: str) -> ReconcileResult | None:
        asked.append(args)
        done = any(order == args["order_id"] for order, _ in world.refunds())
        return ReconcileResult(f"refunded {args['order_id']} (found)") if done else None

    tool_factory = _fresh_each_time(lambda: _times_out_after_refund(world, reconcile=reconcile))
    result, steps = await _fail_then_resume(durable_backend, tool_factory)
    assert result["messages"][-1].content == "refunded A1 (found)"
    assert world.refunds() == [("A1", "-")]
    assert asked == [{"order_id": "A1"}]
    assert [(s.kind, s.detail["how"]) for s in steps] == [("tool", "reconciled")]


async def test_reconcile_finding_nothing_runs_a_failed_tool_again(
    durable_backend: Backend, tmp_path: Path
) -> None:
    world = World(tmp_path / "world.db")
    refund, _ = _fails_first_before_refund(
        world, TimeoutError("connect timeout"), reconcile=lambda args, key: None
    )

    result, _ = await _fail_then_resume(durable_backend, lambda: refund)
    assert result["messages"][-1].content == "refunded A1"
    assert world.refunds() == [("A1", "-")]


async def test_an_exception_declared_as_raised_before_any_effect_runs_again(
    durable_backend: Backend, tmp_path: Path
) -> None:
    world = World(tmp_path / "world.db")
    refund, attempts = _fails_first_before_refund(
        world, InvalidOrderError("order A1 is locked for a minute"),
        raises_before_effect=(InvalidOrderError,),
    )  # fmt: skip

    result, steps = await _fail_then_resume(durable_backend, lambda: refund)
    assert result["messages"][-1].content == "refunded A1"
    assert attempts["n"] == 2
    assert world.refunds() == [("A1", "-")]
    assert [(s.kind, s.detail["how"]) for s in steps] == [("tool", "run")]


async def test_a_subclass_of_a_declared_exception_is_declared_too(
    durable_backend: Backend, tmp_path: Path
) -> None:
    world = World(tmp_path / "world.db")

    class LockedOrderError(InvalidOrderError):
        pass

    refund, _ = _fails_first_before_refund(
        world, LockedOrderError("order A1 is locked"),
        raises_before_effect=(ValueError, InvalidOrderError),
    )  # fmt: skip

    result, _ = await _fail_then_resume(durable_backend, lambda: refund)
    assert result["messages"][-1].content == "refunded A1"
    assert world.refunds() == [("A1", "-")]


async def test_an_undeclared_exception_of_a_declaring_tool_is_refused(
    durable_backend: Backend, tmp_path: Path
) -> None:
    world = World(tmp_path / "world.db")

    def make() -> Any:
        @durable_tool(name="refund", raises_before_effect=(InvalidOrderError,))
        def refund(order_id: str) -> str:
            """Refund an order."""
            world.refund(order_id)
            raise TimeoutError("read timeout")

        return refund

    with pytest.raises(ToolOutcomeUnknownError, match="TimeoutError"):
        await _fail_then_resume(durable_backend, make)
    assert world.refunds() == [("A1", "-")]


async def test_a_keyed_tool_that_raised_runs_again_with_the_same_key(
    durable_backend: Backend, tmp_path: Path
) -> None:
    world = World(tmp_path / "world.db")
    attempts = {"n": 0}

    @durable_tool(name="refund")
    def refund(order_id: str, idempotency_key: str) -> str:
        """Refund an order; the provider deduplicates on the key."""
        attempts["n"] += 1
        world.refund(order_id, idempotency_key)
        if attempts["n"] == 1:
            raise TimeoutError("payments API did not answer")
        return f"refunded {order_id}"

    result, _ = await _fail_then_resume(durable_backend, lambda: refund)
    assert result["messages"][-1].content == "refunded A1"
    (_, first), (_, second) = world.refunds()
    assert first == second
    assert first.startswith("tether-")


async def test_a_safe_to_retry_tool_that_raised_runs_again(
    durable_backend: Backend, tmp_path: Path
) -> None:
    world = World(tmp_path / "world.db")
    tool_factory = _fresh_each_time(lambda: _times_out_after_refund(world, safe_to_retry=True))
    result, _ = await _fail_then_resume(durable_backend, tool_factory)
    assert result["messages"][-1].content == "refunded A1"
    assert len(world.refunds()) == 2  # declared harmless to repeat, so it was repeated


async def test_a_rerun_after_a_declared_failure_is_claimed_again(
    durable_backend: Backend, tmp_path: Path
) -> None:
    """The second attempt must not inherit the first one's 'failed before effect' verdict."""
    world = World(tmp_path / "world.db")
    attempts = {"n": 0}

    @durable_tool(name="refund", raises_before_effect=(InvalidOrderError,))
    def refund(order_id: str) -> str:
        """Refund an order."""
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise InvalidOrderError("locked")
        world.refund(order_id)
        raise TimeoutError("read timeout")  # the second attempt's effect happened

    with pytest.raises(TimeoutError):
        await _fail_then_resume(durable_backend, lambda: refund)
    async with durable_backend.open() as saver:
        with pytest.raises(ToolOutcomeUnknownError):
            await _graph(refund, saver).ainvoke(None, CONFIG)
    assert attempts["n"] == 2
    assert world.refunds() == [("A1", "-")]


def test_a_sync_node_refuses_to_rerun_a_tool_that_raised_after_its_effect(
    tmp_path: Path,
) -> None:
    from tether import open_checkpointer_sync

    world = World(tmp_path / "world.db")
    tool = _times_out_after_refund(world)

    def node(state: State) -> dict[str, Any]:
        return {"messages": [HumanMessage(str(tool.invoke({"order_id": "A1"})))]}

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with open_checkpointer_sync(url) as saver, pytest.raises(TimeoutError):
        one_node(node, saver).invoke({"messages": [HumanMessage("go")]}, CONFIG)
    with (
        open_checkpointer_sync(url) as saver,
        pytest.raises(ToolOutcomeUnknownError, match="TimeoutError"),
    ):
        one_node(node, saver).invoke(None, CONFIG)
    assert world.refunds() == [("A1", "-")]


def test_raises_before_effect_must_name_exception_types() -> None:
    with pytest.raises(TypeError, match="raises_before_effect"):
        durable_tool(raises_before_effect=("ValueError",))(lambda order_id: order_id)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="raises_before_effect"):
        durable_tool(raises_before_effect=ValueError)(lambda order_id: order_id)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="raises_before_effect"):
        durable_tool(raises_before_effect=(int,))(lambda order_id: order_id)  # type: ignore[call-overload]


def _fresh_each_time(factory: Any) -> Any:
    """One tool object shared by both runs (its attempt counter spans them)."""
    tool = factory()
    return lambda: tool
