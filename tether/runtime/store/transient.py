"""Which run-store errors pass on their own, so a long-lived process waits them out.

A worker that dies because SQLite's write lock stayed taken past the busy
timeout, or because PostgreSQL restarted, leaves its capacity missing until an
operator notices. These errors say nothing about the request: the same call
succeeds once the other writer commits or the server is back. Everything else
(a missing schema, a constraint, a bug) is not transient and is raised.
"""

from __future__ import annotations

import functools
import logging
import sqlite3

__all__ = ["is_transient", "log_failure", "transient_types"]

_SQLITE_BUSY = ("database is locked", "database table is locked", "database is busy")


@functools.cache
def transient_types() -> tuple[type[Exception], ...]:
    """The exception classes a transient error is an instance of (not every instance is).

    PostgreSQL's ``OperationalError``: the connection failed, or the server is
    shutting down or restarting. ``PoolTimeout``: no connection came back in time.
    """
    kinds: tuple[type[Exception], ...] = (sqlite3.OperationalError,)
    try:
        import psycopg
        import psycopg_pool
    except ImportError:  # pragma: no cover - the postgres extra is absent
        return kinds
    return (*kinds, psycopg.OperationalError, psycopg_pool.PoolTimeout)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a store error the same call can outlive by waiting."""
    if isinstance(exc, sqlite3.OperationalError):
        return str(exc).startswith(_SQLITE_BUSY)
    return isinstance(exc, transient_types())


def log_failure(logger: logging.Logger, exc: BaseException, message: str, *args: object) -> None:
    """Log a failed pass of a loop that tries again: a transient error as one warning line.

    While the database restarts, every job of every scheduler tick fails the
    same way; a traceback for each would bury the log. A transient error is
    logged as ``message`` and the error's first line; anything else (a bug,
    a missing schema) with its traceback, as ``logger.exception`` would.
    """
    if is_transient(exc):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        logger.warning(
            message + ": %s: %s (transient; tried again)", *args, type(exc).__name__, first
        )
    else:
        logger.error(message, *args, exc_info=exc)
