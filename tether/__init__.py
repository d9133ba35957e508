"""tether: a durable runtime for long-running LangGraph agents."""

from tether._version import __version__
from tether.checkpointing import open_checkpointer, open_checkpointer_sync
from tether.errors import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
    MissingRedisModuleError,
    TetherError,
)

__all__ = [
    "BackendUnavailableError",
    "ConfigurationError",
    "MissingDependencyError",
    "MissingRedisModuleError",
    "TetherError",
    "__version__",
    "open_checkpointer",
    "open_checkpointer_sync",
]
