"""Shared argument rules for ``prune`` across backends."""

from __future__ import annotations

from collections.abc import Sequence

from tether.errors import ConfigurationError

__all__ = ["PRUNE_STRATEGIES", "check_prune_args"]

PRUNE_STRATEGIES = ("keep_latest", "delete")


def check_prune_args(thread_ids: Sequence[str], strategy: str) -> list[str]:
    """Validate ``prune`` arguments before anything is deleted.

    Returns:
        The thread ids as a list of strings.

    Raises:
        TypeError: ``thread_ids`` is a single string (which would otherwise be
            pruned one character at a time).
        ConfigurationError: ``strategy`` is unknown.
    """
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread ids, not a single str")
    if strategy not in PRUNE_STRATEGIES:
        raise ConfigurationError(
            f"unknown prune strategy {strategy!r}; use one of {', '.join(PRUNE_STRATEGIES)}"
        )
    return [str(t) for t in thread_ids]
