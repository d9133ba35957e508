"""The backends tether serves, and where each one's code lives: the one place that knows.

Each entry, by backend name (``memory``, ``sqlite``, ``postgres``, ``redis``), says:

* how to open its saver from a parsed URL (``open_checkpointer`` asks here);
* which upstream saver class its savers derive from, so that a saver is
  recognised by its class, whoever opened it (``store_for`` and key rotation
  ask here);
* how to build the record-store driver on a saver's connection;
* which rotator re-seals its stored envelopes under a new key.

Every hook is a ``"module:attribute"`` path imported on first use, so importing
this module loads no driver, and a backend whose extra is not installed fails
only when it is used, with a :class:`~tether.errors.MissingDependencyError`
naming the extra. Recognising a saver imports nothing either: an object can only
be an instance of a class whose module is already loaded, so the entry looks
its class up in ``sys.modules``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigurationError, MissingDependencyError

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from langgraph.checkpoint.base import BaseCheckpointSaver

    from tether.checkpointing._rotators import Rotator
    from tether.checkpointing._url import CheckpointerURL
    from tether.store import RecordDriver

__all__ = ["BACKENDS", "BackendEntry", "backend_named", "backend_of", "known_backends"]


@dataclass(frozen=True)
class BackendEntry:
    """How tether serves one backend; each path is ``"module:attribute"``.

    Attributes:
        name: The backend's name, as :func:`tether.checkpointing.parse_url` gives it.
        label: Its name in messages, e.g. ``"PostgreSQL"``.
        extra: The pip extra that installs its driver, or ``None`` for a core one.
        saver_class: The upstream saver class every saver of this backend derives from.
        opener: ``opener(url, **options)`` is an async context manager yielding the saver.
        record_driver: The record-store driver class.
        rotator: The key-rotation rewriter class, built with ``(saver, driver)``.
        records_on_saver: Whether the driver is built on the saver's connection
            (called with the saver); ``False`` when it keeps records on its own,
            in this process (called with nothing).
    """

    name: str
    label: str
    extra: str | None
    saver_class: str
    opener: str
    record_driver: str
    rotator: str
    records_on_saver: bool = True

    def open(
        self, url: CheckpointerURL, **options: Any
    ) -> AbstractAsyncContextManager[BaseCheckpointSaver[Any]]:
        """The backend's opener called on ``url`` (not yet entered).

        Raises:
            MissingDependencyError: The backend's extra is not installed.
        """
        opener = self._load(self.opener)
        manager: AbstractAsyncContextManager[BaseCheckpointSaver[Any]] = opener(url, **options)
        return manager

    def serves(self, saver: object) -> bool:
        """Whether ``saver`` is an instance of this backend's upstream saver class."""
        module, _, name = self.saver_class.partition(":")
        cls = getattr(sys.modules.get(module), name, None)
        return isinstance(cls, type) and isinstance(saver, cls)

    def record_driver_for(self, saver: BaseCheckpointSaver[Any]) -> RecordDriver:
        """A new record-store driver beside ``saver`` (one this backend serves)."""
        driver = self._load(self.record_driver)
        built: RecordDriver = driver(saver) if self.records_on_saver else driver()
        return built

    def rotator_for(self, saver: BaseCheckpointSaver[Any], records: RecordDriver) -> Rotator:
        """The rewriter of ``saver``'s store and of its record-store driver ``records``."""
        rotator: Rotator = self._load(self.rotator)(saver, records)
        return rotator

    def _load(self, path: str) -> Any:
        module, _, attribute = path.partition(":")
        try:
            loaded = importlib.import_module(module)
        except MissingDependencyError:
            raise
        except ImportError as exc:
            # A driver of this backend is missing (not tether's own code).
            missing = exc.name or ""
            if self.extra is None or not missing or missing.split(".")[0] == "tether":
                raise
            raise MissingDependencyError(f"the {self.label} checkpointer", self.extra) from exc
        return getattr(loaded, attribute)


_ENTRIES = (
    BackendEntry(
        name="memory",
        label="in-memory",
        extra=None,
        saver_class="langgraph.checkpoint.memory:InMemorySaver",
        opener="tether.checkpointing._memory:open_memory",
        record_driver="tether.store._memory:MemoryDriver",
        rotator="tether.checkpointing._rotators_memory:MemoryRotator",
        records_on_saver=False,
    ),
    BackendEntry(
        name="sqlite",
        label="SQLite",
        extra=None,
        saver_class="langgraph.checkpoint.sqlite.aio:AsyncSqliteSaver",
        opener="tether.checkpointing._sqlite:open_sqlite",
        record_driver="tether.store._sqlite:SqliteDriver",
        rotator="tether.checkpointing._rotators_sql:SqliteRotator",
    ),
    BackendEntry(
        name="postgres",
        label="PostgreSQL",
        extra="postgres",
        saver_class="langgraph.checkpoint.postgres.aio:AsyncPostgresSaver",
        opener="tether.checkpointing._postgres:open_postgres",
        record_driver="tether.store._postgres:PostgresDriver",
        rotator="tether.checkpointing._rotators_sql:PostgresRotator",
    ),
    BackendEntry(
        name="redis",
        label="Redis",
        extra="redis",
        saver_class="langgraph.checkpoint.redis.aio:AsyncRedisSaver",
        opener="tether.checkpointing.redis:open_redis",
        record_driver="tether.store._redis:RedisDriver",
        rotator="tether.checkpointing._rotators_redis:RedisRotator",
    ),
)

BACKENDS: Mapping[str, BackendEntry] = MappingProxyType({e.name: e for e in _ENTRIES})
"""Every backend tether serves, by name."""


def known_backends() -> str:
    """The backends' names for messages: ``"memory, sqlite, postgres or redis"``."""
    *most, last = BACKENDS
    return f"{', '.join(most)} or {last}"


def backend_named(name: str) -> BackendEntry:
    """The entry of the backend ``name``.

    Raises:
        ConfigurationError: No backend has that name.
    """
    entry = BACKENDS.get(name)
    if entry is None:
        raise ConfigurationError(f"unknown backend {name!r}; tether serves {known_backends()}")
    return entry


def backend_of(saver: object) -> BackendEntry | None:
    """The entry of the backend ``saver`` belongs to (beneath every layer), or ``None``."""
    return next((entry for entry in _ENTRIES if entry.serves(saver)), None)
