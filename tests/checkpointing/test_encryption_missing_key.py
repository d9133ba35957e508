"""Encryption never turns off silently.

* ``TETHER_ENCRYPTION_KEYS`` set but empty (or blank) is a configuration error.
* A store that holds envelopes is never opened without a key: ``open_checkpointer``
  fails closed with ``MissingKeyError`` naming the variable to set, whether the store
  was written through ``open_checkpointer`` (which marks it) or, as older versions
  did, without a mark.
"""

from __future__ import annotations

import pytest

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring, run_graph, spec
from tether import open_checkpointer
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.encryption import KeyRing, MissingKeyError
from tether.errors import ConfigurationError


@pytest.mark.parametrize("value", ["", "   ", "\n", " , "])
async def test_keys_variable_set_but_empty_is_a_configuration_error(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", value)
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="TETHER_ENCRYPTION_KEYS is set but"):
        KeyRing.from_env()
    with pytest.raises(ConfigurationError, match="TETHER_ENCRYPTION_KEYS is set but"):
        async with open_checkpointer("memory://"):
            pass
    # Saying so explicitly still opens unencrypted.
    async with open_checkpointer("memory://", encryption=False) as saver:
        assert not isinstance(saver, EncryptedSaver)


def test_keys_variable_unset_means_no_encryption() -> None:
    assert KeyRing.from_env({}) is None


@pytest.mark.parametrize("how", ["unset", "false"])
async def test_a_store_holding_envelopes_is_not_opened_without_a_key(
    durable_backend: Backend, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = durable_backend
    monkeypatch.delenv("TETHER_ENCRYPTION_KEYS", raising=False)
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    async with backend.open(encryption=ring("k1")) as saver:
        await run_graph(saver, "t1")
    options = {"encryption": False} if how == "false" else {}
    with pytest.raises(MissingKeyError, match=r"holds encrypted data.*TETHER_ENCRYPTION_KEYS"):
        async with backend.open(**options):
            pass
    # With the key it opens and reads.
    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", spec("k1"))
    async with backend.open() as saver:
        assert isinstance(saver, EncryptedSaver)
        assert await saver.aget_tuple({"configurable": {"thread_id": "t1"}}) is not None


async def test_a_store_encrypted_by_an_older_version_is_not_opened_without_a_key(
    durable_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Older versions left no mark in the store: a recent checkpoint gives it away."""
    backend = durable_backend
    monkeypatch.delenv("TETHER_ENCRYPTION_KEYS", raising=False)
    async with backend.open(encryption=False) as plain:
        # Layered by hand, as older versions did: envelopes, but no mark in the store.
        await run_graph(EncryptedSaver(plain, ring("k1")), "t1")
    with pytest.raises(MissingKeyError, match="TETHER_ENCRYPTION_KEYS"):
        async with backend.open():
            pass


async def test_a_plain_store_still_opens_without_a_key(
    durable_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TETHER_ENCRYPTION_KEYS", raising=False)
    async with durable_backend.open() as plain:
        await run_graph(plain, "t1")
    async with durable_backend.open() as plain:
        assert not isinstance(plain, EncryptedSaver)
        assert await plain.aget_tuple({"configurable": {"thread_id": "t1"}}) is not None
