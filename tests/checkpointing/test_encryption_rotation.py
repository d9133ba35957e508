"""Key rotation: write under key A, rotate to B (ring B,A), drop A, read everything back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import CANARY, ring, run_graph, spec
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.encryption import KeyRing, UnknownKeyError
from tether.checkpointing.rotation import RotationReport, rotate_keys
from tether.cli import main
from tether.errors import ConfigurationError


async def _seed(saver: BaseCheckpointSaver[Any]) -> None:
    """Two graph threads plus a checkpoint with writes in a child namespace."""
    await run_graph(saver, "thread-1")
    await run_graph(saver, "thread-2")
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"note": CANARY}
    checkpoint["channel_versions"] = {"note": saver.get_next_version(None, None)}
    config: Any = {"configurable": {"thread_id": "thread-1", "checkpoint_ns": "child:1"}}
    stored = await saver.aput(
        config,
        checkpoint,
        {"source": "loop", "step": 1, "parents": {}, "who": CANARY},  # type: ignore[typeddict-unknown-key]
        checkpoint["channel_versions"],
    )
    await saver.aput_writes(stored, [("note", CANARY), ("__error__", CANARY)], "task-x")


async def _everything(saver: BaseCheckpointSaver[Any]) -> list[tuple[Any, ...]]:
    return sorted(
        [
            (
                repr(t.config),
                repr(t.checkpoint["channel_values"]),
                repr(sorted(t.metadata.items())),
                repr(t.pending_writes),
            )
            async for t in saver.alist(None)
        ]
    )


def _layer(saver: BaseCheckpointSaver[Any], keys: KeyRing) -> EncryptedSaver:
    assert isinstance(saver, EncryptedSaver)
    return EncryptedSaver(saver.inner, keys)


async def test_rotation_end_to_end(backend: Backend) -> None:
    async with backend.open(encryption=ring("key-a")) as saver:
        await _seed(saver)
        before = await _everything(saver)
        assert len(before) > 5
        seen: list[RotationReport] = []
        report = await rotate_keys(
            _layer(saver, ring("key-b", "key-a")),
            progress=lambda r: seen.append(RotationReport(**vars(r))),
        )
        assert report.threads_total == report.threads_done == 2
        assert [r.threads_done for r in seen] == [1, 2]
        # Values are sealed under each thread's data key: only the keys are re-wrapped.
        assert report.data_keys == 2
        assert report.rewrapped == 3  # the two data keys and the store's keyed-hash secret
        assert report.current > 10
        assert report.plaintext == 0
        assert report.active_key_id == "key-b"
        again = await rotate_keys(_layer(saver, ring("key-b", "key-a")))
        assert again.rewrapped == 0  # idempotent: nothing left under key-a
        assert again.current == report.rewrapped + report.current
        assert await _everything(_layer(saver, ring("key-b"))) == before
        with pytest.raises(UnknownKeyError, match="key 'key-b'"):
            await _everything(_layer(saver, ring("key-a")))


async def test_rotation_without_the_old_key_changes_nothing(backend: Backend) -> None:
    async with backend.open(encryption=ring("key-a")) as saver:
        await _seed(saver)
        before = await _everything(saver)
        with pytest.raises(UnknownKeyError, match=r"thread '.*key 'key-a'"):
            await rotate_keys(_layer(saver, ring("key-b")))
        assert await _everything(saver) == before


async def test_interrupted_rotation_resumes(backend: Backend) -> None:
    async with backend.open(encryption=ring("key-a")) as saver:
        await _seed(saver)
        before = await _everything(saver)

        def stop_after_first(report: RotationReport) -> None:
            raise KeyboardInterrupt  # the operator pressed Ctrl-C after thread 1

        with pytest.raises(KeyboardInterrupt):
            await rotate_keys(_layer(saver, ring("key-b", "key-a")), progress=stop_after_first)
        # Mixed state reads fine with both keys, and the rerun finishes the job.
        assert await _everything(_layer(saver, ring("key-b", "key-a"))) == before
        report = await rotate_keys(_layer(saver, ring("key-b", "key-a")))
        assert report.current > 0
        assert report.rewrapped > 0
        assert await _everything(_layer(saver, ring("key-b"))) == before


async def test_rotation_needs_an_encrypted_saver(backend: Backend) -> None:
    async with backend.open(encryption=False) as saver:
        with pytest.raises(ConfigurationError, match="opened with encryption"):
            await rotate_keys(saver)


def test_cli_rotate(
    durable_backend: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = durable_backend
    prefix = ["--key-prefix", backend.key_prefix] if backend.key_prefix else []

    async def seed() -> list[tuple[Any, ...]]:
        async with backend.open(encryption=ring("key-a")) as saver:
            await _seed(saver)
            return await _everything(saver)

    async def read(keys: KeyRing) -> list[tuple[Any, ...]]:
        async with backend.open(encryption=keys) as saver:
            return await _everything(saver)

    before = asyncio.run(seed())
    monkeypatch.delenv("TETHER_ENCRYPTION_KEYS", raising=False)
    assert main(["keys", "rotate", "--url", backend.url, *prefix]) == 1
    assert "needs TETHER_ENCRYPTION_KEYS" in capsys.readouterr().err

    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", spec("key-b", "key-a"))
    assert main(["keys", "rotate", "--url", backend.url, *prefix]) == 0
    out = capsys.readouterr()
    assert "[2/2] thread" in out.err
    assert "rotated 2 thread(s) to key 'key-b'" in out.out
    assert asyncio.run(read(ring("key-b"))) == before


def test_cli_generate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "generate", "--id", "prod-2026"]) == 0
    line = capsys.readouterr().out.strip()
    assert KeyRing.from_spec(line).key_ids == ("prod-2026",)
    assert main(["keys", "generate"]) == 0
    assert KeyRing.from_spec(capsys.readouterr().out.strip()).active_key_id.startswith("k")


async def test_rotation_names_an_unsupported_saver() -> None:
    class CustomSaver(BaseCheckpointSaver[Any]):
        """A third-party saver tether has no rewriter for (no storage behind it)."""

    with pytest.raises(ConfigurationError, match="does not support CustomSaver"):
        await rotate_keys(EncryptedSaver(CustomSaver(), ring("key-a")))


async def test_rotation_counts_values_stored_in_clear_and_leaves_them(backend: Backend) -> None:
    async with backend.open(encryption=False) as plain:
        await run_graph(plain, "legacy")
        migrating = EncryptedSaver(plain, ring("key-b", "key-a", allow_plaintext=True))
        before = await _everything(migrating)
        report = await rotate_keys(migrating)
        assert report.plaintext > 5
        assert report.rewrapped == 0
        assert await _everything(migrating) == before
