"""open_checkpointer's encryption options, the environment switch, and the metadata policy."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import CANARY, ring, spec
from tether import open_checkpointer
from tether.checkpointing._encrypted import SEALED_METADATA_KEY, EncryptedSaver
from tether.checkpointing.encryption import MissingKeyError
from tether.errors import ConfigurationError


async def _put(saver: Any, thread_id: str, metadata: dict[str, Any]) -> Any:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return await saver.aput(config, empty_checkpoint(), metadata, {})


async def test_environment_turns_encryption_on_and_false_turns_it_off(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", spec("env-key"))
    async with backend.open(encryption=False) as saver:
        assert not isinstance(saver, EncryptedSaver)
    async with backend.open() as saver:
        assert isinstance(saver, EncryptedSaver)
        assert saver.encryption.active_key_id == "env-key"
    if backend.name != "memory":  # now it holds envelopes: never opened without the key
        with pytest.raises(MissingKeyError, match="holds encrypted data"):
            async with backend.open(encryption=False):
                pass


async def test_option_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_ENCRYPTION_KEYS", raising=False)
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="encryption=True but no key is configured"):
        async with open_checkpointer("memory://", encryption=True):
            pass
    with pytest.raises(ConfigurationError, match="must be a KeyRing, True, False or None"):
        async with open_checkpointer("memory://", encryption="yes"):
            pass
    with pytest.raises(ConfigurationError, match="searchable_metadata only applies"):
        async with open_checkpointer("memory://", searchable_metadata=("tenant",)):
            pass
    with pytest.raises(ConfigurationError, match=r"not a single string"):
        async with open_checkpointer("memory://", encryption=ring("k1"), searchable_metadata="t"):
            pass
    with pytest.raises(ConfigurationError, match=r"may not list '__tether_sealed__'"):
        async with open_checkpointer(
            "memory://", encryption=ring("k1"), searchable_metadata=[SEALED_METADATA_KEY]
        ):
            pass
    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", "main:tooshort")
    with pytest.raises(ConfigurationError, match="key 'main'"):
        async with open_checkpointer("memory://"):
            pass


async def test_metadata_policy_and_filters(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1"), searchable_metadata=("tenant",)) as saver:
        assert isinstance(saver, EncryptedSaver)
        for i, email in enumerate([CANARY, "other@example.org", CANARY]):
            await _put(
                saver,
                f"t{i}",
                {
                    "source": "input",
                    "step": i,
                    "parents": {},
                    "run_id": f"run-{i}",
                    "tenant": "acme",
                    "email": email,
                },
            )
        raw = await saver.inner.aget_tuple({"configurable": {"thread_id": "t0"}})
        assert raw is not None
        clear = {k: v for k, v in raw.metadata.items() if k != SEALED_METADATA_KEY}
        assert clear == {
            "source": "input",
            "step": 0,
            "parents": {},
            "run_id": "run-0",
            "tenant": "acme",
        }
        assert CANARY not in str(raw.metadata)

        async def ids(**filter: Any) -> list[str]:
            limit = filter.pop("limit", None)
            found = saver.alist(None, filter=filter, limit=limit)
            return sorted([t.config["configurable"]["thread_id"] async for t in found])

        assert await ids(tenant="acme") == ["t0", "t1", "t2"]
        assert await ids(email=CANARY) == ["t0", "t2"]  # sealed key: filtered after decrypting
        assert await ids(email=CANARY, step=2) == ["t2"]
        assert len(await ids(email=CANARY, limit=1)) == 1
        assert await ids(run_id="run-1") == ["t1"]


async def test_config_metadata_is_sealed_too(backend: Backend) -> None:
    """Savers merge config["metadata"] and configurable keys into metadata; they are sealed."""
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        config: Any = {
            "configurable": {"thread_id": "t", "checkpoint_ns": "", "user_email": CANARY},
            "metadata": {"customer": CANARY},
        }
        await saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        raw = await saver.inner.aget_tuple({"configurable": {"thread_id": "t"}})
        assert raw is not None
        assert CANARY not in str(raw.metadata)
        tup = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
        assert tup is not None
        metadata: dict[str, Any] = dict(tup.metadata)
        assert metadata["customer"] == CANARY
        assert metadata["user_email"] == CANARY
