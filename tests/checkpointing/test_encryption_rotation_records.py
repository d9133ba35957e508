"""Key rotation covers every envelope tether writes, and is safe while runs are live.

Following the documented steps (new key first, rotate, drop the old key) leaves a paused
run that resumes, an approval that can be decided and a step log that reads. A worker
writing during the rotation keeps its writes.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import empty_checkpoint

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import key, ring, spec
from tether.approvals import Approvers, Stop, decide, list_approvals, requires_approval
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.encryption import KeyRing, UnknownKeyError
from tether.checkpointing.rotation import rotate_keys
from tether.cli import main
from tether.graphs import FakePaymentsProvider
from tether.graphs._refund_scenario import refund_effects, refund_input
from tether.graphs.refund import build_refund_graph
from tether.steps import read_steps
from tether.store import store_for

CONFIG: Any = {"configurable": {"thread_id": "refund-1"}}


def _gate(issue_refund: BaseTool, provider: FakePaymentsProvider) -> BaseTool:
    return requires_approval(
        issue_refund,
        approvers=Approvers(users=["alice"]),
        why=lambda a: f"refund {a['amount_cents']} cents on {a['order_id']}",
        expires_in=timedelta(hours=1),
        on_expiry=Stop(),
        observe=lambda a: {"order": asdict(provider.get_order(a["order_id"]))},
    )


def test_a_paused_run_resumes_after_rotating_and_dropping_the_old_key(
    durable_backend: Backend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    backend = durable_backend

    async def pause() -> None:
        async with backend.open(encryption=ring("key-a")) as saver:
            graph = build_refund_graph(checkpointer=saver, workdir=tmp_path, gate_refund=_gate)
            out = await graph.ainvoke(refund_input(), CONFIG)
            assert out["__interrupt__"]
            assert [s.kind for s in await read_steps(saver, "refund-1")].count("model") == 2

    asyncio.run(pause())
    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", spec("key-b", "key-a"))
    prefix = ["--key-prefix", backend.key_prefix] if backend.key_prefix else []
    assert main(["keys", "rotate", "--url", backend.url, "--quiet", *prefix]) == 0
    summary = capsys.readouterr().out
    assert " record(s)" in summary
    assert " step(s)" in summary
    assert main(["keys", "rotate", "--url", backend.url, "--quiet", *prefix]) == 0
    assert "0 value(s) re-encrypted" in capsys.readouterr().out
    monkeypatch.delenv("TETHER_ENCRYPTION_KEYS")

    async def resume() -> None:
        async with backend.open(encryption=ring("key-b")) as saver:  # key-a is gone
            graph = build_refund_graph(checkpointer=saver, workdir=tmp_path, gate_refund=_gate)
            (view,) = await list_approvals(saver, thread_id="refund-1")
            await decide(
                saver, "refund-1", view.request.approval_id, "approve",
                graph=graph, by="alice", args_sha256=view.request.args_sha256,
            )  # fmt: skip
            state = await graph.aget_state(CONFIG)
            assert state.next == ()
            final = state.values["messages"][-1]
            assert isinstance(final, AIMessage)
            assert not final.tool_calls
            assert refund_effects(tmp_path) == {"refunds": 1, "emails": 1}
            steps = await read_steps(saver, "refund-1")
            events = [s.output["event"] for s in steps if s.kind == "approval"]
            assert events[:2] == ["requested", "decided"]
            assert [s.name for s in steps if s.kind == "tool"] == [
                "lookup_order",
                "issue_refund",
                "send_email",
            ]
        async with backend.open(encryption=ring("key-b")) as saver:
            store = store_for(saver)
            raw = await store.driver.steps("refund-1")
            assert raw
            # Steps are sealed under the thread's data key, which is wrapped by key-b.
            data_key = await store.data_key("refund-1")
            assert data_key is not None
            assert {saver.encryption.key_id_of(_sealed(p)) for _, p in raw} == {data_key.key_id}  # type: ignore[attr-defined]
            wrapped = await store.driver.get("thread_key", "thread:refund-1")
            assert wrapped is not None
            assert saver.encryption.key_id_of(_sealed(wrapped.payload)) == "key-b"  # type: ignore[attr-defined]
        with pytest.raises(UnknownKeyError, match="key 'key-b'"):  # nothing left under key-a
            async with backend.open(encryption=ring("key-a")):
                pass

    asyncio.run(resume())


def _sealed(payload: str) -> bytes:
    return base64.b64decode(payload.removeprefix("enc1:"))


class _HookRing(KeyRing):
    """The rotation's ring; calls ``hook`` once, on its first re-seal in thread ``t0``.

    That is the moment a rotation has read the thread's stored values and not yet
    written them back.
    """

    hook: Any = None

    def rewrap(self, blob: bytes, aad: bytes, where: str = "", **kw: Any) -> bytes | None:
        if self.hook is not None and "'t0'" in where:
            hook, self.hook = self.hook, None
            hook()
        return super().rewrap(blob, aad, where, **kw)


async def _seed(saver: Any, thread_id: str) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"note": f"note of {thread_id}"}
    checkpoint["channel_versions"] = {"note": saver.get_next_version(None, None)}
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    metadata: Any = {"source": "loop", "step": 1, "parents": {}}
    stored = await saver.aput(config, checkpoint, metadata, checkpoint["channel_versions"])
    await saver.aput_writes(stored, [("__error__", "first error")], "task-x")
    store = store_for(saver)
    await store.insert("tool", f"{thread_id}/k", {"v": "old"}, thread_id=thread_id)
    await store.append_step(thread_id, {"n": 0})
    return stored


async def test_a_worker_writing_during_rotation_keeps_its_writes(
    durable_backend: Backend,
) -> None:
    backend = durable_backend
    threads = [f"t{i}" for i in range(3)]
    async with backend.open(encryption=ring("key-a")) as saver:
        stored = {t: await _seed(saver, t) for t in threads}

    async def work() -> None:
        # A worker already restarted with the new ring, updating state of t0 and t2.
        async with backend.open(encryption=ring("key-b", "key-a")) as live:
            for thread_id in ("t0", "t2"):
                await live.aput_writes(stored[thread_id], [("__error__", "retried")], "task-x")
                store = store_for(live)
                await store.upsert("tool", f"{thread_id}/k", {"v": "new"}, thread_id=thread_id)
                await store.append_step(thread_id, {"n": 1})

    worker = threading.Thread(target=lambda: asyncio.run(work()))

    def start_worker() -> None:
        worker.start()
        # Where the backend does not lock (Redis), the worker writes right now,
        # between the rotation's read and its write; elsewhere it waits for the lock.
        time.sleep(1.0 if backend.name == "redis" else 0.2)

    rotating = _HookRing([("key-b", key("key-b")), ("key-a", key("key-a"))])
    rotating.hook = start_worker
    async with backend.open(encryption=ring("key-a")) as saver:
        assert isinstance(saver, EncryptedSaver)
        await rotate_keys(EncryptedSaver(saver.inner, rotating))
    await asyncio.to_thread(worker.join)

    async with backend.open(encryption=ring("key-b")) as saver:  # key-a is gone
        store = store_for(saver)
        for thread_id in threads:
            tup = await saver.aget_tuple(stored[thread_id])
            assert tup is not None
            updated = thread_id != "t1"
            error = "retried" if updated else "first error"
            assert tup.pending_writes == [("task-x", "__error__", error)], thread_id
            record = await store.get("tool", f"{thread_id}/k")
            assert record is not None
            assert record.value == {"v": "new" if updated else "old"}, thread_id
            assert await store.steps(thread_id) == [{"n": 0}, *([{"n": 1}] if updated else [])]
