"""Compensation passes that overlap, and runs that follow each other on one thread.

Two passes at once must not run one undo twice (a provider may refuse the
second call with the same key while the first is in flight, and its failure
must not overwrite the first's success); a pass of one run must not take over
another run's compensation.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.backends import Backend
from tests.compensation.saga import APPROVERS, CONFIG, INPUT, World, ask_saga, saga_graph
from tests.compensation.test_compensation import _decide
from tests.steps.graphs import State, one_node
from tether import open_checkpointer
from tether.approvals import get_approval
from tether.cli import main
from tether.compensation import _flow, compensate, compensating, compensation_waits_on
from tether.steps import durable_tool


class SlowUndo:
    """A charge whose first undo waits at a gate: its pass stays mid-undo until it opens."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    def graph(self, saver: Any) -> Any:
        async def refund(args: dict[str, Any], result: Any, key: str) -> str:
            self.calls.append(key)
            if len(self.calls) == 1:
                self.started.set()
                await self.gate.wait()
            return "refunded"

        return _charging_graph(saver, refund)


def _charging_graph(saver: Any, refund: Any, charge: Any = None) -> Any:
    """One node: a durable ``charge`` (undone by ``refund``), then a step that fails."""

    def charged(order_id: str, idempotency_key: str) -> str:
        """Charge a card."""
        return f"charged {order_id}"

    tool = durable_tool(charge or charged, name="charge", compensate=refund)

    async def node(state: State) -> dict[str, Any]:
        await tool.ainvoke({"order_id": "A1"})
        raise RuntimeError("the next step failed")

    return compensating(one_node(node, saver), approvers=APPROVERS, tools=[tool])


async def _failed_run(graph: Any) -> None:
    with pytest.raises(RuntimeError, match="next step failed"):
        await graph.ainvoke(INPUT, CONFIG)


async def test_a_pass_while_another_is_undoing_waits_and_undoes_nothing(
    durable_backend: Backend,
) -> None:
    slow = SlowUndo()
    async with durable_backend.open() as saver:
        graph = slow.graph(saver)
        await _failed_run(graph)
        first = asyncio.create_task(compensate(graph, CONFIG, reason="failed"))
        await asyncio.wait_for(slow.started.wait(), 30)
        second = await asyncio.wait_for(compensate(graph, CONFIG), 30)  # runs nothing
        slow.gate.set()
        done = await first
        third = await compensate(graph, CONFIG)
    assert len(slow.calls) == 1
    assert [(e.tool, e.status) for e in second.effects] == [("charge", "waiting")]
    assert "another pass" in second.effects[0].why
    assert "is undoing it now" in second.effects[0].why
    assert not second.complete
    assert [(e.tool, e.status) for e in done.effects] == [("charge", "undone")]
    assert [(e.tool, e.status) for e in third.effects] == [("charge", "undone")]


async def _mid_undo_on_host_a(
    graph: Any, slow: SlowUndo, monkeypatch: pytest.MonkeyPatch
) -> asyncio.Task[Any]:
    """The run failed; a pass on "host-a" is mid-undo, and this process is now "host-b"."""
    await _failed_run(graph)
    monkeypatch.setattr(socket, "gethostname", lambda: "host-a")
    first = asyncio.create_task(compensate(graph, CONFIG, reason="failed"))
    await asyncio.wait_for(slow.started.wait(), 30)
    monkeypatch.setattr(socket, "gethostname", lambda: "host-b")
    return first


async def test_a_claim_from_another_host_is_taken_over_after_its_lease(
    durable_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another host's process cannot be asked whether it lives: its claim holds for a lease."""
    slow = SlowUndo()
    async with durable_backend.open() as saver:
        graph = slow.graph(saver)
        first = await _mid_undo_on_host_a(graph, slow, monkeypatch)
        within = await asyncio.wait_for(compensate(graph, CONFIG), 30)
        monkeypatch.setattr(_flow, "CLAIM_LEASE_S", 0.0)
        after = await compensate(graph, CONFIG)  # its undo returns at once
        slow.gate.set()
        await first
    assert [e.status for e in within.effects] == ["waiting"]
    assert "host-a" in within.effects[0].why
    assert [e.status for e in after.effects] == ["undone"]
    assert len(slow.calls) == 2
    assert slow.calls[0] == slow.calls[1]  # the same idempotency key


async def test_two_passes_that_find_one_dead_claim_undo_it_once(
    durable_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both read the claim of a pass that died mid-undo before either takes it over (each in
    a thread of its own, with its own loop and saver): one undoes, the other waits for it."""
    slow = SlowUndo()
    async with durable_backend.open() as saver:
        graph = slow.graph(saver)
        first = await _mid_undo_on_host_a(graph, slow, monkeypatch)
        both_read = threading.Barrier(2, timeout=10)

        def dead_after_both_read(claim: dict[str, Any]) -> bool:
            both_read.wait()  # each pass has read the claim: the race is set
            return False  # host-a's pass is taken for dead

        monkeypatch.setattr(_flow, "_in_progress", dead_after_both_read)

        async def a_pass() -> Any:
            async with durable_backend.open() as own:
                return await compensate(slow.graph(own), CONFIG)

        reports = await asyncio.gather(
            *(asyncio.to_thread(asyncio.run, a_pass()) for _ in range(2))
        )
        slow.gate.set()
        await first
    assert len(slow.calls) == 2  # host-a's undo, and one of the two passes'
    assert slow.calls[0] == slow.calls[1]
    statuses = sorted(r.effects[0].status for r in reports)
    assert statuses in (["undone", "waiting"], ["undone", "undone"]), statuses
    waiting = [r.effects[0].why for r in reports if r.effects[0].status == "waiting"]
    assert all("is undoing it now" in why for why in waiting)


async def test_deciding_one_runs_request_continues_that_runs_compensation(
    durable_backend: Backend, tmp_path: Path
) -> None:
    """Run A and then run B failed on one thread; A's request is approved after B's pass."""
    world = World(tmp_path / "world.db")
    async with durable_backend.open() as saver:
        graph = saga_graph(saver, world, charge="ask")
        reports = {}
        for run in ("A", "B"):
            config = {"configurable": {"thread_id": "saga", "run_id": run}}
            with pytest.raises(RuntimeError, match="carrier refused"):
                await graph.ainvoke(INPUT, config)
            reports[run] = await compensate(graph, config, reason=f"run {run}", run_id=run)
        asked = {run: report.awaiting[0].approval_id for run, report in reports.items()}
        result = await _decide(saver, graph, asked["A"], "approve")
        b_waits = await compensation_waits_on(
            saver, (await get_approval(saver, asked["B"])).request
        )
    assert [(e.tool, e.status) for e in reports["B"].effects] == [
        ("ship", "not undone"),
        ("email", "undone"),
        ("charge", "awaiting a person"),
    ]
    assert result.values["reason"] == "run A"
    assert [(e["tool"], e["status"]) for e in result.values["effects"]] == [
        ("ship", "not undone"),
        ("email", "undone"),
        ("charge", "undone"),
    ]
    assert world.kinds().count("undo-charge 4200") == 1
    assert b_waits


async def test_a_pass_for_a_run_that_did_nothing_leaves_the_threads_compensation_alone(
    durable_backend: Backend, tmp_path: Path
) -> None:
    world = World(tmp_path / "world.db")
    async with durable_backend.open() as saver:
        graph = saga_graph(saver, world, charge="ask")
        with pytest.raises(RuntimeError, match="carrier refused"):
            await graph.ainvoke(INPUT, CONFIG)
        first = await compensate(graph, CONFIG, reason="the carrier refused")
        typo = await compensate(graph, CONFIG, reason="oops", run_id="no-such-run")
        again = await compensate(graph, CONFIG)
    assert typo.effects == []
    assert [(e.tool, e.status) for e in again.effects] == [
        (e.tool, e.status) for e in first.effects
    ]
    assert again.awaiting[0].approval_id == first.awaiting[0].approval_id
    assert again.reason == "the carrier refused"


def test_the_cli_decides_a_compensation_request_by_continuing_the_compensation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tether approvals approve --graph`` without ``--runtime``: the undo runs."""
    monkeypatch.setenv("SAGA_WORLD", str(tmp_path / "world.db"))
    url = f"sqlite:///{tmp_path / 'saga.db'}"

    async def failed() -> Any:
        async with open_checkpointer(url) as saver:
            graph = ask_saga(saver)
            with pytest.raises(RuntimeError, match="carrier refused"):
                await graph.ainvoke(INPUT, CONFIG)
            report = await compensate(graph, CONFIG, reason="the carrier refused")
            return (await get_approval(saver, report.awaiting[0].approval_id)).request

    request = asyncio.run(failed())
    code = main(
        [
            "approvals", "approve", request.approval_id, "--url", url,
            "--graph", "tests.compensation.saga:ask_saga", "--by", "dana",
            "--args-sha256", request.args_sha256,
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"approve recorded for {request.approval_id} by dana" in out
    assert "the run finished" in out
    assert World(tmp_path / "world.db").kinds().count("undo-charge 4200") == 1


async def test_a_pass_while_a_decided_retry_is_undoing_waits_and_undoes_nothing(
    durable_backend: Backend,
) -> None:
    """The undo failed and a person approved a retry; another pass runs during the retry."""
    calls: list[str] = []
    gate = asyncio.Event()
    retrying = asyncio.Event()

    async def refund(args: dict[str, Any], result: Any, key: str) -> str:
        calls.append(key)
        if len(calls) == 1:
            raise ConnectionError("payments provider down")
        retrying.set()
        await gate.wait()
        return "refunded"

    async with durable_backend.open() as saver:
        graph = _charging_graph(saver, refund)
        await _failed_run(graph)
        failed = await compensate(graph, CONFIG, reason="failed")
        deciding = asyncio.create_task(
            _decide(saver, graph, failed.awaiting[0].approval_id, "approve")
        )
        await asyncio.wait_for(retrying.wait(), 30)
        meanwhile = await asyncio.wait_for(compensate(graph, CONFIG), 30)  # runs nothing
        gate.set()
        decided = await deciding
    assert len(calls) == 2
    assert calls[0] == calls[1]
    assert [e.status for e in meanwhile.effects] == ["waiting"]
    assert [e["status"] for e in decided.values["effects"]] == ["undone"]


class _Died(BaseException):
    """Stands for the process dying during the effect: nothing after the claim is written."""


def _raises(order_id: str, idempotency_key: str) -> str:
    """Charge a card (the provider does not answer)."""
    raise TimeoutError("the provider did not answer")


def _dies(order_id: str) -> str:  # no idempotency key: the call is claimed first
    """Charge a card (the process dies during the call)."""
    raise _Died


@pytest.mark.parametrize(
    ("charge", "error"),
    [(_raises, TimeoutError), (_dies, _Died)],
    ids=["the-call-raised", "cut-off-after-its-claim"],
)
async def test_an_effect_whose_outcome_is_unknown_is_listed_with_its_arguments(
    durable_backend: Backend, charge: Any, error: type[BaseException]
) -> None:
    """A call that raised, or whose process died after its claim, may have acted: the
    person who checks it by hand sees what it was."""
    async with durable_backend.open() as saver:
        graph = _charging_graph(saver, lambda args, result, key: "refunded", charge)
        with pytest.raises(error):
            await graph.ainvoke(INPUT, CONFIG)
        report = await compensate(graph, CONFIG, reason="stopped")
    [effect] = report.effects
    assert (effect.tool, effect.status) == ("charge", "not undone")
    assert "its outcome is unknown" in effect.why
    assert effect.args == {"order_id": "A1"}
    assert report.to_dict()["not_undone"][0]["args"] == {"order_id": "A1"}
