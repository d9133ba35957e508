"""The exceptions tether raises. Each names what was wrong and how to fix it."""

from __future__ import annotations

__all__ = [
    "BackendUnavailableError",
    "ConfigurationError",
    "MissingDependencyError",
    "MissingRedisModuleError",
    "TetherError",
]


class TetherError(Exception):
    """Base class of every error tether raises on purpose."""


class ConfigurationError(TetherError, ValueError):
    """A URL, option or setting is malformed or unsupported."""


class MissingDependencyError(TetherError, ImportError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, what: str, extra: str) -> None:
        self.extra = extra
        super().__init__(
            f"{what} needs the '{extra}' extra, which is not installed: "
            f"pip install 'tether[{extra}]'"
        )


class BackendUnavailableError(TetherError, ConnectionError):
    """A storage server could not be reached or used."""


class MissingRedisModuleError(BackendUnavailableError):
    """The Redis server lacks RediSearch or RedisJSON, which the Redis saver needs."""

    def __init__(self, url: str, missing: list[str]) -> None:
        self.missing = missing
        names = " and ".join(missing)
        super().__init__(
            f"the Redis server at {url} lacks the {names} module"
            f"{'s' if len(missing) > 1 else ''}, which tether's Redis checkpointer needs. "
            "Use Redis 8 (search and JSON are built in), Redis Stack, or load "
            "redisearch.so and rejson.so with --loadmodule."
        )
