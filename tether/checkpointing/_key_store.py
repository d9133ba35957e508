"""The data-key store: threads' wrapped data keys kept at their own URL.

By default a thread's data key (:mod:`tether.store._data_keys`) is a record in
the same database as the thread's ciphertext, so a full backup of that
database taken before an erasure still holds the wrapped key, which the key
ring opens. With ``open_checkpointer(url, data_keys_url=...)`` (or
``TETHER_DATA_KEYS_URL``) the keys live in a second record store at that URL,
any backend tether serves, and a copy of the checkpointer's database alone
cannot decrypt a thread erased after it was taken.

This module opens that store beside a checkpointer and remembers it per
backend saver (:func:`key_store_of`), which is where the record store
(``store_for``) and key rotation find it, whatever layers wrap the saver.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.checkpointing._backends import BackendEntry, backend_named
from tether.checkpointing._delegating import innermost
from tether.checkpointing._url import CheckpointerURL, parse_url, redact
from tether.errors import ConfigurationError, MissingDependencyError

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["ENV_DATA_KEYS_URL", "KeyStore", "data_keys_url_for", "key_store_of", "open_key_store"]

ENV_DATA_KEYS_URL = "TETHER_DATA_KEYS_URL"
"""The environment variable naming the data-key store's URL."""

_OPTION = "data_keys_url"
_SOURCE = f"{_OPTION} / {ENV_DATA_KEYS_URL}"


@dataclass(frozen=True)
class KeyStore:
    """A data-key store opened beside a checkpointer.

    Attributes:
        url: Its URL, secrets redacted (for messages).
        entry: Its backend.
        saver: Its backend saver, on whose connection its record driver is built.
    """

    url: str
    entry: BackendEntry
    saver: BaseCheckpointSaver[Any]


_attached: weakref.WeakKeyDictionary[Any, KeyStore] = weakref.WeakKeyDictionary()


def key_store_of(saver: Any) -> KeyStore | None:
    """The data-key store opened with ``saver``'s backend (beneath every layer), if any."""
    return _attached.get(innermost(saver))


def data_keys_url_for(option: str | bool | None) -> str | None:
    """The data-key store's URL: ``option`` if given, else the environment's.

    ``None`` defers to ``TETHER_DATA_KEYS_URL``; ``False`` keeps the keys in the
    checkpointer's own store even when it is set.

    Raises:
        ConfigurationError: The option is neither a URL, ``None`` nor ``False``,
            or the environment variable is set but empty.
    """
    if option is False:
        return None
    if option is None:
        env = os.environ.get(ENV_DATA_KEYS_URL)
        if env is None:
            return None
        if not env.strip():
            raise ConfigurationError(
                f"{ENV_DATA_KEYS_URL} is set but empty; set it to the URL of the data-key "
                "store (e.g. postgresql://host/keys) or unset it to keep the keys in the "
                "checkpointer's own store"
            )
        return env.strip()
    if not isinstance(option, str) or not option.strip():
        raise ConfigurationError(
            f"{_OPTION} must be the URL of the data-key store (e.g. "
            f"'postgresql://host/keys'), None or False, not {option!r}"
        )
    return option.strip()


def _database(url: CheckpointerURL) -> tuple[str, str, str]:
    """What names one database: a SQLite file by its resolved path."""
    if url.backend == "sqlite" and url.path != ":memory:":
        return url.backend, "", str(Path(url.path).expanduser().resolve())
    return url.backend, url.where, url.path


def _durable(url: CheckpointerURL) -> bool:
    """Whether what the URL stores outlives this process."""
    return url.backend != "memory" and not (url.backend == "sqlite" and url.path == ":memory:")


def _refuse(main: CheckpointerURL, keys: CheckpointerURL) -> None:
    """Refuse a key store that would not keep the keys apart, or would lose them."""
    where = f"the data-key store ({_SOURCE}) {redact(keys.url)!r}"
    if _durable(keys) and _database(keys) == _database(main):
        raise ConfigurationError(
            f"{where} is the checkpointer's own database; point it at another database "
            "(the point of the key store is that a copy of the checkpointer's database "
            "does not hold the keys), or unset it"
        )
    if _durable(keys) != _durable(main):
        raise ConfigurationError(
            f"{where} and the checkpointer {redact(main.url)!r} must both be in memory "
            "or both be durable: keys kept in memory beside a durable store would be lost "
            "when this process exits, and every thread's data with them"
        )


@asynccontextmanager
async def open_key_store(
    url: str, main: CheckpointerURL, saver: BaseCheckpointSaver[Any]
) -> AsyncIterator[KeyStore]:
    """Open the data-key store at ``url`` beside ``saver`` (opened from ``main``).

    Raises:
        ConfigurationError: The URL is malformed, names the checkpointer's own
            database, mixes memory and durable storage, or the store cannot be opened.
        MissingDependencyError: Its backend's extra is not installed.
    """
    try:
        parsed = parse_url(url)
    except ConfigurationError as exc:
        raise ConfigurationError(f"the data-key store ({_SOURCE}): {exc}") from None
    _refuse(main, parsed)
    entry = backend_named(parsed.backend)
    async with AsyncExitStack() as stack:
        try:
            keys_saver = await stack.enter_async_context(entry.open(parsed))
        except MissingDependencyError:
            raise
        except Exception as exc:
            raise ConfigurationError(
                f"the data-key store ({_SOURCE}) at {redact(url)!r} cannot be opened: {exc}"
            ) from exc
        store = KeyStore(redact(url), entry, keys_saver)
        base = innermost(saver)
        _attached[base] = store
        try:
            yield store
        finally:
            _attached.pop(base, None)
