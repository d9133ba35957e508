"""Per-backend rewriters behind :func:`tether.checkpointing.rotation.rotate_keys`.

Each rewriter lists the store's threads (of checkpoints, records and step logs)
and re-seals one thread's envelopes in place: every checkpoint value, pending
write and sealed metadata, every record and every step. A value is replaced
only if it is still the one that was read (a transaction holding its rows on
PostgreSQL and SQLite, a compare-and-set on Redis), so a worker writing during
the rotation never loses its write. See ``rotation.py``.

This module holds what they share; each backend's rewriter lives in its own
module (``_rotators_memory``, ``_rotators_sql``, ``_rotators_redis``), found
through :mod:`tether.checkpointing._backends`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, fields
from typing import Any

from tether.checkpointing import binding
from tether.checkpointing._encrypted import SEALED_METADATA_KEY
from tether.checkpointing.encryption import KeyRing

__all__ = ["Counts", "Rotator", "ThreadPass", "sealed_metadata", "secret_slot"]

_ENCRYPTED = "enc1:"  # how the record store marks ciphertext (tether.store._record)
_THREAD_KEY_KIND = "thread_key"  # a thread's wrapped data key (tether.store._data_keys)


@dataclass
class Counts:
    """Envelopes seen in one thread.

    Attributes:
        rewrapped: Re-sealed under the active key (records and steps included).
        current: Already under the active key and the current envelope version.
        plaintext: Values stored in clear (left as they are).
        records: Records re-sealed.
        steps: Step-log entries re-sealed.
        data_keys: Of ``records``, threads' data keys re-wrapped (the values
            sealed under them are ``current``: they need no rewrite).
    """

    rewrapped: int = 0
    current: int = 0
    plaintext: int = 0
    records: int = 0
    steps: int = 0
    data_keys: int = 0

    def add(self, other: Counts, sign: int = 1) -> None:
        """Add (or with ``sign=-1`` take away) ``other``'s counts."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + sign * getattr(other, f.name))

    def copy(self) -> Counts:
        return Counts(**{f.name: getattr(self, f.name) for f in fields(self)})


@dataclass
class ThreadPass:
    """One thread's rewrite: the ring and what this thread counted so far."""

    ring: KeyRing
    thread_id: str
    counts: Counts = field(default_factory=Counts)

    def rewrap(
        self, blob: Any, aad: bytes, where: str, v1_aad: bytes | None = None
    ) -> bytes | None:
        """The re-sealed envelope, or ``None`` when nothing is to be written."""
        if not self.ring.is_envelope(blob):
            self.counts.plaintext += 1
            return None
        place = f"thread {self.thread_id!r}, {where}"
        new = self.ring.rewrap(blob, aad, place, v1_aad=v1_aad)
        if new is None:
            self.counts.current += 1
        else:
            self.counts.rewrapped += 1
        return new

    def rewrap_write(
        self, stored: tuple[str, Any], ns: str, cid: str, task_id: str, channel: str
    ) -> bytes | None:
        """Re-seal one pending write stored as ``(serde type, bytes)``."""
        type_, blob = stored
        return self.rewrap(
            blob if type_ == "bytes" else None,
            binding.write(self.thread_id, ns, cid, task_id, channel),
            f"namespace {ns!r}, checkpoint {cid!r}, task {task_id!r}, channel {channel!r}",
        )

    def rewrap_metadata(
        self, metadata: dict[str, Any], ns: str, cid: str, versions: dict[str, Any]
    ) -> bool:
        """Re-seal the sealed metadata in place, bound to the row's channel ``versions``."""
        sealed = metadata.get(SEALED_METADATA_KEY)
        if not isinstance(sealed, str):
            self.counts.plaintext += 1
            return False
        new = self.rewrap(
            base64.b64decode(sealed),
            binding.metadata(self.thread_id, ns, cid, versions),
            f"namespace {ns!r}, checkpoint {cid!r}, metadata",
            binding.metadata_v1(self.thread_id, ns, cid),
        )
        if new is None:
            return False
        metadata[SEALED_METADATA_KEY] = base64.b64encode(new).decode()
        return True

    def rewrap_values(self, checkpoint: dict[str, Any], ns: str, unwrap: Any = None) -> bool:
        """Re-seal ``checkpoint["channel_values"]`` in place; ``unwrap`` maps stored form."""
        versions = checkpoint.get("channel_versions", {})
        changed = False
        for ch, stored in checkpoint.get("channel_values", {}).items():
            blob = unwrap(stored) if unwrap else stored
            new = self.rewrap(
                blob,
                binding.channel(self.thread_id, ns, ch, versions.get(ch)),
                f"namespace {ns!r}, channel {ch!r}",
            )
            if new is not None:
                checkpoint["channel_values"][ch] = new if unwrap is None else redis_bytes(new)
                changed = True
        return changed

    def rewrap_record(self, kind: str, key: str, payload: str) -> str | None:
        """A record's new stored text, or ``None`` when it stays."""
        new = self._rewrap_text(
            payload,
            binding.record(self.thread_id, kind, key),
            binding.record_v1(self.thread_id, kind, key),
            f"record {kind!r} {key!r}",
        )
        self.counts.records += new is not None
        self.counts.data_keys += new is not None and kind == _THREAD_KEY_KIND
        return new

    def rewrap_step(self, index: int, payload: str) -> str | None:
        """A step's new stored text, or ``None`` when it stays."""
        new = self._rewrap_text(
            payload,
            binding.step(self.thread_id, index),
            binding.step_v1(self.thread_id, index),
            f"step {index}",
        )
        self.counts.steps += new is not None
        return new

    def _rewrap_text(self, payload: str, aad: bytes, v1_aad: bytes, where: str) -> str | None:
        if not payload.startswith(_ENCRYPTED):
            self.counts.plaintext += 1
            return None
        blob = base64.b64decode(payload[len(_ENCRYPTED) :])
        new = self.rewrap(blob, aad, where, v1_aad)
        return None if new is None else _ENCRYPTED + base64.b64encode(new).decode("ascii")


def redis_bytes(blob: bytes) -> dict[str, str]:
    """Envelope bytes as RedisJSON stores them in a checkpoint document."""
    return {"__bytes__": base64.b64encode(blob).decode()}


class Rotator:
    """Lists a backend's threads and re-seals one thread at a time.

    Args:
        saver: The backend saver (beneath every layer).
        records: The backend's record-store driver.
    """

    def __init__(self, saver: Any, records: Any) -> None:
        self.saver = saver
        self.records = records

    async def threads(self) -> list[str]:
        raise NotImplementedError

    async def rewrite(self, one: ThreadPass) -> None:
        raise NotImplementedError

    async def sealed(self) -> str | None:
        """Where the store shows it holds envelopes, found cheaply; ``None`` if nowhere.

        Looks for the mark every store opened with encryption gets (the keyed-hash
        secret, see :mod:`tether.store._keyed`), then at a recent checkpoint for
        stores encrypted by versions that left no mark.
        """
        raise NotImplementedError


def secret_slot() -> tuple[str, str]:
    """The (kind, key) of the record that marks a store as encrypted."""
    from tether.store import SECRET_KEY, SECRET_KIND

    return SECRET_KIND, SECRET_KEY


def sealed_metadata(metadata: Any) -> bool:
    """Whether stored metadata (a dict, or JSON text or bytes) holds a sealed blob."""
    if isinstance(metadata, str | bytes):
        return SEALED_METADATA_KEY.encode() in (
            metadata if isinstance(metadata, bytes) else metadata.encode()
        )
    return isinstance(metadata, dict) and SEALED_METADATA_KEY in metadata
