"""With encryption on, no identifier stored in clear carries a plain hash of the arguments.

Record keys of durable tools called without a tool-call id, and approval ids of requests
keyed by their arguments, used to hold a prefix of the arguments' SHA-256: an amount could
be found from the key by trying every amount. With encryption on they are keyed hashes
(HMAC) under a per-store secret that rotation re-wraps, so they stay the same across key
rotation; records and approvals written under the old plain keys are still found.
"""

from __future__ import annotations

import operator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring
from tests.raw_storage import raw_dump
from tether.approvals import Approvers, Stop, decide, list_approvals, request_approval
from tether.approvals.hashing import approval_id_for, args_sha256
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.rotation import rotate_keys
from tether.steps import durable_tool, read_steps
from tether.steps._codec import canonical_hash
from tether.store import RecordStore, store_for

AMOUNT = 4217


class State(TypedDict, total=False):
    amount: int
    log: Annotated[list[str], operator.add]


def _graph(saver: BaseCheckpointSaver[Any], charges: list[int]) -> Any:
    @durable_tool
    def charge(amount: int) -> str:
        """Charge the card."""
        charges.append(amount)
        return f"charged {amount}"

    def pay(state: State) -> State:
        amount = state["amount"]
        # Called directly (no model tool call): keyed by the arguments' hash.
        charged = charge.invoke({"amount": amount})
        outcome = request_approval(
            "pay",
            {"to": "bob", "amount": amount},
            why="invoice 42",
            approvers=Approvers(users=["alice"]),
            expires_in=timedelta(hours=1),
            on_expiry=Stop(),
        )
        return {"log": [charged, outcome.decision]}

    graph = StateGraph(State)
    graph.add_node("pay", pay)
    graph.add_edge(START, "pay")
    graph.add_edge("pay", END)
    return graph.compile(checkpointer=saver)


def _plain_hashes() -> list[str]:
    tool_args = canonical_hash({"amount": AMOUNT})
    approval_args = args_sha256({"to": "bob", "amount": AMOUNT})
    return [tool_args[:16], approval_args[:16], approval_args]


async def _raw_rows(backend: Backend, saver: BaseCheckpointSaver[Any]) -> str:
    rows = await raw_dump(backend, saver)
    if backend.name == "memory":  # the memory record store lives beside the saver
        driver: Any = store_for(saver)._driver
        rows += [f"{k!r}={r!r}" for k, r in driver._records.items()]
        rows += [f"{k!r}={v!r}" for k, v in driver._steps.items()]
    return "\n".join(rows)


CONFIG: Any = {"configurable": {"thread_id": "t1"}}


async def test_no_plain_argument_hash_is_stored_in_clear(backend: Backend) -> None:
    charges: list[int] = []
    async with backend.open(encryption=ring("k1")) as saver:
        graph = _graph(saver, charges)
        await graph.ainvoke({"amount": AMOUNT, "log": []}, CONFIG)
        (view,) = await list_approvals(saver, thread_id="t1")
        assert view.request.args_sha256 == args_sha256({"to": "bob", "amount": AMOUNT})
        legacy_id = approval_id_for("t1", view.request.checkpoint_ns, view.request.key, 0)
        assert view.request.approval_id != legacy_id
        stored = await _raw_rows(backend, saver)
        assert view.request.approval_id in stored  # the scan does see the ids
        for plain in [*_plain_hashes(), legacy_id]:
            assert plain not in stored, plain


async def test_without_encryption_the_ids_are_unchanged(backend: Backend) -> None:
    """The keyed hash is an encryption feature: plain stores keep their ids (and the scan
    above would find a plain hash if one were stored)."""
    charges: list[int] = []
    async with backend.open(encryption=False) as saver:
        await _graph(saver, charges).ainvoke({"amount": AMOUNT, "log": []}, CONFIG)
        (view,) = await list_approvals(saver, thread_id="t1")
        legacy_id = approval_id_for("t1", view.request.checkpoint_ns, view.request.key, 0)
        assert view.request.approval_id == legacy_id
        stored = await _raw_rows(backend, saver)
        assert _plain_hashes()[0] in stored


async def test_keyed_ids_survive_key_rotation(durable_backend: Backend) -> None:
    backend = durable_backend
    charges: list[int] = []
    async with backend.open(encryption=ring("key-a")) as saver:
        await _graph(saver, charges).ainvoke({"amount": AMOUNT, "log": []}, CONFIG)
        (before,) = await list_approvals(saver, thread_id="t1")
        report = await rotate_keys(EncryptedSaver(saver.inner, ring("key-b", "key-a")))  # type: ignore[attr-defined]
        assert report.records > 0
    async with backend.open(encryption=ring("key-b")) as saver:
        graph = _graph(saver, charges)
        (after,) = await list_approvals(saver, thread_id="t1")
        assert after.request.approval_id == before.request.approval_id
        await decide(
            saver, "t1", after.request.approval_id, "approve",
            graph=graph, by="alice", args_sha256=after.request.args_sha256,
        )  # fmt: skip
        state = await graph.aget_state(CONFIG)
        assert state.values["log"] == [f"charged {AMOUNT}", "approve"]
        assert charges == [AMOUNT]  # replayed from its record, found under the same key
        kinds = [s.kind for s in await read_steps(saver, "t1")]
        assert "tool" in kinds
        assert "approval" in kinds


async def test_records_under_the_plain_keys_of_older_versions_are_still_found(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run paused by an older version (plain-hash keys, encryption on) resumes."""
    charges: list[int] = []
    async with backend.open(encryption=ring("k1")) as saver:

        async def no_keyed_hash(self: RecordStore) -> None:
            return None  # what older versions did: plain hashes

        with monkeypatch.context() as patched:
            patched.setattr(RecordStore, "keyed_hash", no_keyed_hash)
            patched.setattr(store_for(saver), "_keyed", None)  # loaded when it was opened
            graph = _graph(saver, charges)
            await graph.ainvoke({"amount": AMOUNT, "log": []}, CONFIG)
            (old,) = await list_approvals(saver, thread_id="t1")
            assert old.request.approval_id == approval_id_for(
                "t1", old.request.checkpoint_ns, old.request.key, 0
            )
        graph = _graph(saver, charges)
        await decide(
            saver, "t1", old.request.approval_id, "approve",
            graph=graph, by="alice", args_sha256=old.request.args_sha256,
        )  # fmt: skip
        state = await graph.aget_state(CONFIG)
        assert state.values["log"] == [f"charged {AMOUNT}", "approve"]
        assert charges == [AMOUNT]
        views = await list_approvals(saver, thread_id="t1", status=None)
        assert [v.request.approval_id for v in views] == [old.request.approval_id]
