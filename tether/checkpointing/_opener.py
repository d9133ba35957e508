"""``open_checkpointer``: one URL in, a ready LangGraph checkpointer out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.checkpointing._backends import BackendEntry, backend_named
from tether.checkpointing._key_store import ENV_DATA_KEYS_URL, data_keys_url_for, open_key_store
from tether.checkpointing._url import parse_url, redact
from tether.checkpointing.encryption import ENV_KEYS, MissingKeyError, key_ring_for
from tether.errors import ConfigurationError

__all__ = ["open_checkpointer"]


async def _refuse_sealed_store(
    backend: BackendEntry, saver: BaseCheckpointSaver[Any], url: str
) -> None:
    """Fail closed when a store opened without a key holds envelopes.

    Without this, envelopes would come back as raw bytes and new state would be
    written in clear beside them.
    """
    from tether.store import store_for  # the store package builds on this one

    found = await backend.rotator_for(saver, store_for(saver).driver).sealed()
    if found is not None:
        raise MissingKeyError(
            f"the checkpointer at {redact(url)} holds encrypted data ({found} is encrypted) "
            f"but no encryption key is configured: set {ENV_KEYS}='<id>:<key>[,...]' to the "
            "key ring it was written with (or pass encryption=KeyRing(...)); it is not "
            "opened unencrypted, so nothing is read as raw ciphertext or written in clear"
        )


@asynccontextmanager
async def open_checkpointer(url: str, **options: Any) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open the checkpointer ``url`` names, run its ``setup()``, and close it on exit.

    Args:
        url: ``memory://``, ``sqlite:///relative.db`` (``sqlite:////abs/path.db``),
            ``postgresql://user@host:5432/db`` (or ``postgres://``), or
            ``redis://host:6379`` (or ``rediss://``).
        **options: Backend options: for postgres ``min_size``, ``max_size`` and
            ``connect_timeout``; for redis ``key_prefix``, ``ttl`` and
            ``connect_timeout``. For every backend: ``encryption`` (a
            :class:`~tether.checkpointing.encryption.KeyRing`; ``True`` to
            require the keys from the environment; ``False`` to turn encryption
            off even when ``TETHER_ENCRYPTION_KEYS`` is set; by default the
            environment decides) and ``searchable_metadata`` (metadata keys to
            keep in clear for ``list(filter=...)``). With encryption on:
            ``data_keys_url``, the URL of a second store (any backend above)
            that keeps the threads' wrapped data keys apart from their
            ciphertext (by default ``TETHER_DATA_KEYS_URL``; ``False`` keeps
            them in this store even when that is set; see docs/encryption.md,
            crypto-shredding).

    Yields:
        A set-up ``BaseCheckpointSaver`` with every capability of LangGraph's
        conformance suite (``delete_for_runs``, ``copy_thread``, ``prune``);
        an :class:`~tether.checkpointing._encrypted.EncryptedSaver` around it
        when encryption is on.

    Raises:
        ConfigurationError: The URL or an option is malformed or unknown,
            ``TETHER_ENCRYPTION_KEYS`` is set but empty, or a data-key store is
            configured without encryption, or cannot be opened.
        MissingKeyError: Encryption is off but the store holds encrypted data
            (it is never opened unencrypted).
        MissingDependencyError: The backend's extra is not installed.
        BackendUnavailableError: The server cannot be reached or lacks a module.
    """
    ring = key_ring_for(options.pop("encryption", None))
    searchable = options.pop("searchable_metadata", ())
    if searchable and ring is None:
        raise ConfigurationError(
            "searchable_metadata only applies with encryption on; set TETHER_ENCRYPTION_KEYS "
            "or pass encryption=KeyRing(...)"
        )
    keys_url = data_keys_url_for(options.pop("data_keys_url", None))
    if keys_url is not None and ring is None:
        raise ConfigurationError(
            f"a data-key store (data_keys_url / {ENV_DATA_KEYS_URL}) only applies with "
            f"encryption on: set {ENV_KEYS} or pass encryption=KeyRing(...), or unset it"
        )
    parsed = parse_url(url)
    backend = backend_named(parsed.backend)
    async with backend.open(parsed, **options) as saver:
        if ring is None:
            await _refuse_sealed_store(backend, saver, url)
            yield saver
            return
        from tether.checkpointing._encrypted import EncryptedSaver
        from tether.store import store_for

        async with AsyncExitStack() as keys:
            if keys_url is not None:
                await keys.enter_async_context(open_key_store(keys_url, parsed, saver))
            layer = EncryptedSaver(saver, ring, searchable_metadata=searchable)
            # Loads (or creates) the store's keyed-hash secret, which also marks the
            # store as encrypted for a later open without a key.
            await store_for(layer).keyed_hash()
            yield layer
