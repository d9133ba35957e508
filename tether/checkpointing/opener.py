"""``open_checkpointer``: one URL in, a ready LangGraph checkpointer out."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.checkpointing.url import CheckpointerURL, parse_url

__all__ = ["open_checkpointer"]


class _Opener(Protocol):
    def __call__(
        self, url: CheckpointerURL, **options: Any
    ) -> AbstractAsyncContextManager[BaseCheckpointSaver[Any]]: ...


def _backend_opener(backend: str) -> _Opener:
    # Imported lazily: each backend's module raises MissingDependencyError naming
    # the extra to install when its driver is absent.
    module = importlib.import_module(f"tether.checkpointing.{backend}")
    opener: _Opener = getattr(module, f"open_{backend}")
    return opener


@asynccontextmanager
async def open_checkpointer(url: str, **options: Any) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open the checkpointer ``url`` names, run its ``setup()``, and close it on exit.

    Args:
        url: ``memory://``, ``sqlite:///relative.db`` (``sqlite:////abs/path.db``),
            ``postgresql://user@host:5432/db`` (or ``postgres://``), or
            ``redis://host:6379`` (or ``rediss://``).
        **options: Backend options: for postgres ``min_size``, ``max_size`` and
            ``connect_timeout``; for redis ``key_prefix``, ``ttl`` and
            ``connect_timeout``.

    Yields:
        A set-up ``BaseCheckpointSaver`` with every capability of LangGraph's
        conformance suite (``delete_for_runs``, ``copy_thread``, ``prune``).

    Raises:
        ConfigurationError: The URL or an option is malformed or unknown.
        MissingDependencyError: The backend's extra is not installed.
        BackendUnavailableError: The server cannot be reached or lacks a module.
    """
    parsed = parse_url(url)
    opener = _backend_opener(parsed.backend)
    async with opener(parsed, **options) as saver:
        yield saver
