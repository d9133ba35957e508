"""Associated data: what every envelope tether writes is bound to, in one encoding.

Every binding is ``aad(domain, *parts)`` (see
:func:`tether.checkpointing.encryption.aad`): a domain label naming the kind of
value, then the parts saying where it lives, each prefixed with its length, so
no two different lists of parts give the same bytes and no value of one kind
opens as another kind::

    domain       parts
    channel      thread, namespace, channel, channel version
    write        thread, namespace, checkpoint id, task id, channel
    metadata     thread, namespace, checkpoint id, number of channels,
                 then channel and version for each channel, sorted by name
    record       thread, kind, key
    step         thread, step index

The same encoding, with its own domains, is the input of the keyed hashes
that replace argument hashes in clear identifiers (:data:`TOOL_ARGS`,
:data:`APPROVAL_ID`, :data:`IDEMPOTENCY_KEY`).

Envelopes of version 1 (written before this encoding covered records and
channel versions) were bound the same way for channels and writes, but their
metadata did not bind the channel versions, and records and steps were bound
to ``"thread|kind|key"`` and ``"thread|step|index"``, which collide. The
``*_v1`` functions rebuild those bytes, only to read what older versions wrote;
``tether keys rotate`` rewrites such envelopes to the current version.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from tether.checkpointing.encryption import aad, aad_part

__all__ = [
    "APPROVAL_ID",
    "CHANNEL",
    "IDEMPOTENCY_KEY",
    "METADATA",
    "RECORD",
    "STEP",
    "TOOL_ARGS",
    "WRITE",
    "channel",
    "metadata",
    "metadata_v1",
    "name_part",
    "record",
    "record_v1",
    "scope",
    "step",
    "step_v1",
    "version_part",
    "versions",
    "write",
]

CHANNEL = "channel"
WRITE = "write"
METADATA = "metadata"
RECORD = "record"
STEP = "step"
TOOL_ARGS = "tool-args"
APPROVAL_ID = "approval-id"
IDEMPOTENCY_KEY = "idempotency-key"


@lru_cache(maxsize=1024)
def scope(domain: str, thread_id: str, ns: str) -> bytes:
    """The prefix shared by every binding of ``domain`` in one thread and namespace.

    A binding is this prefix followed by its remaining parts, so callers on the
    hot path build it once per thread and extend it (``aad(*a) + aad(*b) ==
    aad(*a, *b)``).
    """
    return aad(domain, thread_id, ns)


name_part = lru_cache(maxsize=4096)(aad_part)
"""One encoded part, cached: channel names recur at every step."""


def version_part(version: Any) -> bytes:
    """A channel version as one part (``None`` is the empty string)."""
    return aad_part("" if version is None else str(version))


def channel(thread_id: str, ns: str, name: str, version: Any) -> bytes:
    """A channel value at one channel version.

    The version, not the checkpoint id, because PostgreSQL and the memory saver
    share one blob among every checkpoint that has that version.
    """
    return scope(CHANNEL, str(thread_id), ns) + name_part(name) + version_part(version)


def write(thread_id: str, ns: str, checkpoint_id: str, task_id: str, name: str) -> bytes:
    """A pending write. The write index is not bound: LangGraph does not return it."""
    return scope(WRITE, str(thread_id), ns) + aad(checkpoint_id, task_id) + name_part(name)


def versions(channel_versions: Mapping[str, Any]) -> bytes:
    """Every channel's version, sorted by channel: the tail of a metadata binding.

    Sorted because backends may hand the mapping back in another order
    (PostgreSQL's JSONB sorts object keys).
    """
    parts = [aad_part(str(len(channel_versions)))]
    for name, version in sorted(channel_versions.items()):
        raw = ("" if version is None else str(version)).encode()  # version_part(), inlined
        parts += (name_part(name), len(raw).to_bytes(4, "big"), raw)
    return b"".join(parts)


def metadata(
    thread_id: str, ns: str, checkpoint_id: str, channel_versions: Mapping[str, Any]
) -> bytes:
    """A checkpoint's sealed metadata, bound to the checkpoint's channel versions.

    Binding the versions is what makes a checkpoint whole: every channel value
    is bound to its own version, and this binds which versions belong together,
    so an older value and version spliced into a newer checkpoint is refused.
    """
    return (
        scope(METADATA, str(thread_id), ns) + aad_part(checkpoint_id) + versions(channel_versions)
    )


def metadata_v1(thread_id: str, ns: str, checkpoint_id: str) -> bytes:
    """Version-1 metadata binding (no channel versions); for reading only."""
    return scope(METADATA, str(thread_id), ns) + aad_part(checkpoint_id)


def record(thread_id: str, kind: str, key: str) -> bytes:
    """A record of the record store."""
    return aad(RECORD, thread_id, kind, key)


def record_v1(thread_id: str, kind: str, key: str) -> bytes:
    """Version-1 record binding (ambiguous ``|``-joined text); for reading only."""
    return f"{thread_id}|{kind}|{key}".encode()


def step(thread_id: str, index: int) -> bytes:
    """One entry of a thread's step log."""
    return aad(STEP, thread_id, str(index))


def step_v1(thread_id: str, index: int) -> bytes:
    """Version-1 step binding; for reading only."""
    return f"{thread_id}|step|{index}".encode()
