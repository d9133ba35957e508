"""The run store's retention queries, reached from an open run store."""

from __future__ import annotations

from tether.runtime.store import RetentionPlane, RunStore

__all__ = ["retention_plane"]


def retention_plane(store: RunStore) -> RetentionPlane:
    """``store`` as a :class:`RetentionPlane` (both run store backends are one).

    Raises:
        TypeError: ``store`` is another implementation of the run store protocol.
    """
    if not isinstance(store, RetentionPlane):
        raise TypeError(
            f"retention needs tether's PostgreSQL or SQLite run store, got {type(store).__name__}"
        )
    return store
