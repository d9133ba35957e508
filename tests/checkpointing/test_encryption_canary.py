"""With encryption on, a PII canary never reaches raw storage on any backend."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from tests.backends import Backend, fresh_backend
from tests.checkpointing.encryption_helpers import (
    CANARY,
    contains_canary,
    raw_storage,
    ring,
    run_graph,
    run_graph_sync,
    spec,
)
from tether import open_checkpointer_sync
from tether.checkpointing._delegating import innermost
from tether.checkpointing._encrypted import EncryptedSaver


def _check_result(result: dict[str, object]) -> None:
    messages = result["messages"]
    assert isinstance(messages, list)
    assert result["note"] == f"customer wrote from {CANARY}"
    assert any(isinstance(m, ToolMessage) and CANARY in str(m.content) for m in messages)
    assert messages[-1].content == f"reviewer said: yes, {CANARY}"


async def test_canary_never_stored_in_clear(backend: Backend) -> None:
    thread = f"t-{uuid.uuid4().hex[:8]}"
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        _check_result(await run_graph(saver, thread))
        raw = await raw_storage(backend, saver)
        assert raw, "nothing was stored"
        assert not contains_canary(raw), f"{backend.name} stores the canary in clear"
        # Reading back through the layer gives the values and the custom metadata.
        history = [t async for t in saver.alist({"configurable": {"thread_id": thread}})]
        assert history
        assert all(t.metadata.get("customer_email") == CANARY for t in history)
        assert any(t.pending_writes for t in history)


async def test_the_scan_finds_the_canary_without_encryption(backend: Backend) -> None:
    """The same run unencrypted is caught, so the scan above cannot pass vacuously."""
    async with backend.open(encryption=False) as saver:
        await run_graph(saver, "plain")
        assert contains_canary(await raw_storage(backend, saver))


async def test_postgres_keeps_no_channel_value_inline(
    servers: dict[str, str], tmp_path: Path
) -> None:
    """Envelopes are bytes, so PostgresSaver puts every value in checkpoint_blobs."""
    with fresh_backend("postgres", servers, tmp_path) as backend:
        async with backend.open(encryption=ring("k1")) as saver:
            await run_graph(saver, "t")
        await _assert_no_inline_values(backend.url)


async def _assert_no_inline_values(url: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM checkpoints WHERE checkpoint -> 'channel_values' <> '{}'"
        )
        assert (await cur.fetchone()) == (0,)
        cur = await conn.execute("SELECT DISTINCT type FROM checkpoint_blobs")
        assert {r[0] for r in await cur.fetchall()} == {"bytes"}


def test_sync_invoke_encrypts_with_only_the_environment_variable(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_checkpointer_sync(url) with TETHER_ENCRYPTION_KEYS set: graph.invoke works."""
    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", spec("k1"))
    with open_checkpointer_sync(backend.url, **backend.options) as saver:
        assert isinstance(saver, EncryptedSaver)
        assert saver.encryption.active_key_id == "k1"
        _check_result(run_graph_sync(saver, "sync-thread"))
        state = saver.get_tuple({"configurable": {"thread_id": "sync-thread"}})
        assert state is not None
        assert state.checkpoint["channel_values"]["note"] == f"customer wrote from {CANARY}"
        assert innermost(saver) is saver.inner
