"""Ids: time-ordered run and thread ids, system assistant ids, worker ids, and id checks.

Also the root label of a tenant's items in the server's store (:func:`tenant_store_root`).

Run and thread ids are ``uuid6`` strings (time-ordered; LangGraph validates only
the UUID format). The Python API also accepts caller-chosen thread ids such as
``"ticket-42"``: any non-empty string of at most :data:`MAX_ID_LENGTH`
characters without NUL (which neither PostgreSQL text nor every driver can hold).
"""

from __future__ import annotations

import os
import secrets
import socket
from uuid import UUID, uuid5

from langgraph.checkpoint.base.id import uuid6

from tether._text import text_problem
from tether.runtime.errors import InvalidRunRequestError

__all__ = [
    "MAX_ID_LENGTH",
    "SYSTEM_ASSISTANT_NAMESPACE",
    "TENANT_STORE_PREFIX",
    "check_id",
    "new_id",
    "new_worker_id",
    "system_assistant_id",
    "tenant_store_root",
]

MAX_ID_LENGTH = 255
# LangGraph's namespace for the assistant every graph gets (langgraph_api graph.py).
SYSTEM_ASSISTANT_NAMESPACE = UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")


def new_id() -> str:
    """A new time-ordered id (``uuid6``), as LangGraph's server makes them."""
    return str(uuid6())


def system_assistant_id(graph_id: str) -> str:
    """The id of the assistant LangGraph creates for ``graph_id`` (``uuid5``)."""
    return str(uuid5(SYSTEM_ASSISTANT_NAMESPACE, graph_id))


# No label a client sends can start with it: the store API refuses control characters.
TENANT_STORE_PREFIX = "\x1etenant:"


def tenant_store_root(tenant: str) -> str:
    """The first namespace label of every store item of ``tenant`` (``""`` included).

    The server puts it in front of each namespace a caller names and takes it off
    what it answers, so a tenant reaches only its own items, and an erasure of the
    tenant deletes them by it. The tenant id is hex-encoded: namespace labels
    cannot hold ``.``.
    """
    return TENANT_STORE_PREFIX + tenant.encode("utf-8").hex()


def new_worker_id() -> str:
    """``<host>:<pid>:<6 hex>``: readable in listings, unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def check_id(value: object, what: str) -> str:
    """``value`` if it is a usable id, else :class:`InvalidRunRequestError` naming ``what``.

    Args:
        value: The id to check.
        what: Its name in the message (``"thread_id"``, ``"run_id"``, ...).
    """
    if not isinstance(value, str):
        raise InvalidRunRequestError(f"{what} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidRunRequestError(f"{what} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidRunRequestError(
            f"{what} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}"
        )
    problem = text_problem(value)
    if problem is not None:
        raise InvalidRunRequestError(f"{what} {value!r} {problem}")
    return value
