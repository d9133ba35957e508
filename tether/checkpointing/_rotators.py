"""Per-backend rewriters behind :func:`tether.checkpointing.rotation.rotate_keys`.

Each rewriter lists the store's threads (of checkpoints, records and step logs)
and re-seals one thread's envelopes in place: every checkpoint value, pending
write and sealed metadata, every record and every step. A value is replaced
only if it is still the one that was read (a transaction holding its rows on
PostgreSQL and SQLite, a compare-and-set on Redis), so a worker writing during
the rotation never loses its write. See ``rotation.py``.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
from dataclasses import dataclass, field, fields
from typing import Any

from tether.checkpointing import binding
from tether.checkpointing.encrypted import SEALED_METADATA_KEY
from tether.checkpointing.encryption import KeyRing

__all__ = ["Counts", "Rotator", "ThreadPass", "rotator_for", "sealed_metadata", "secret_slot"]

_ENCRYPTED = "enc1:"  # how the record store marks ciphertext (tether.store.record)


@dataclass
class Counts:
    """Envelopes seen in one thread.

    Attributes:
        rewrapped: Re-sealed under the active key (records and steps included).
        current: Already under the active key and the current envelope version.
        plaintext: Values stored in clear (left as they are).
        records: Records re-sealed.
        steps: Step-log entries re-sealed.
    """

    rewrapped: int = 0
    current: int = 0
    plaintext: int = 0
    records: int = 0
    steps: int = 0

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
        secret, see :mod:`tether.store.keyed`), then at a recent checkpoint for
        stores encrypted by versions that left no mark.
        """
        raise NotImplementedError


def secret_slot() -> tuple[str, str]:
    """The (kind, key) of the record that marks a store as encrypted."""
    from tether.store.keyed import SECRET_KEY, SECRET_KIND

    return SECRET_KIND, SECRET_KEY


def sealed_metadata(metadata: Any) -> bool:
    """Whether stored metadata (a dict, or JSON text or bytes) holds a sealed blob."""
    if isinstance(metadata, str | bytes):
        return SEALED_METADATA_KEY.encode() in (
            metadata if isinstance(metadata, bytes) else metadata.encode()
        )
    return isinstance(metadata, dict) and SEALED_METADATA_KEY in metadata


class _Memory(Rotator):
    async def sealed(self) -> str | None:
        with self.records._lock:
            if secret_slot() in self.records._records:
                return "its keyed-hash secret"
        return None

    async def threads(self) -> list[str]:
        saver, records = self.saver, self.records
        found = set(saver.storage) | {k[0] for k in saver.writes} | {k[0] for k in saver.blobs}
        with records._lock:
            found |= {r.thread_id for r in records._records.values()} | set(records._steps)
        return sorted(found)

    async def rewrite(self, one: ThreadPass) -> None:
        saver = self.saver
        serde, thread_id = saver.serde, one.thread_id
        updates: list[tuple[dict[Any, Any], Any, Any]] = []
        for key, (type_, blob) in list(saver.blobs.items()):
            if key[0] == thread_id and type_ != "empty":
                new = one.rewrap(
                    blob if type_ == "bytes" else None,
                    binding.channel(*key),
                    f"namespace {key[1]!r}, channel {key[2]!r}",
                )
                if new is not None:
                    updates.append((saver.blobs, key, ("bytes", new)))
        for ns, checkpoints in saver.storage.get(thread_id, {}).items():
            for cid, (checkpoint_typed, metadata_typed, parent) in list(checkpoints.items()):
                metadata = serde.loads_typed(metadata_typed)
                versions = serde.loads_typed(checkpoint_typed).get("channel_versions", {})
                if one.rewrap_metadata(metadata, ns, cid, versions):
                    value = (checkpoint_typed, serde.dumps_typed(metadata), parent)
                    updates.append((checkpoints, cid, value))
        for (tid, ns, cid), writes in saver.writes.items():
            if tid != thread_id:
                continue
            for inner_key, (task_id, ch, typed, path) in list(writes.items()):
                new = one.rewrap_write(typed, ns, cid, task_id, ch)
                if new is not None:
                    updates.append((writes, inner_key, (task_id, ch, ("bytes", new), path)))
        for target, key, value in updates:  # all opened: now swap them in
            target[key] = value
        self._rewrite_records(one)

    def _rewrite_records(self, one: ThreadPass) -> None:
        driver = self.records
        with driver._lock:  # the driver's own lock: no write interleaves
            for slot, raw in list(driver._records.items()):
                if raw.thread_id == one.thread_id:
                    new = one.rewrap_record(raw.kind, raw.key, raw.payload)
                    if new is not None:
                        driver._records[slot] = dataclasses.replace(raw, payload=new)
            log = driver._steps.get(one.thread_id, {})
            for index, (payload, run_id) in list(log.items()):
                new = one.rewrap_step(index, payload)
                if new is not None:
                    log[index] = (new, run_id)


_BASES: dict[str, tuple[str, str, str, str]] = {
    "memory": ("langgraph.checkpoint.memory", "InMemorySaver", __name__, "_Memory"),
    "sqlite": (
        "langgraph.checkpoint.sqlite.aio",
        "AsyncSqliteSaver",
        "tether.checkpointing._rotators_sql",
        "SqliteRotator",
    ),
    "postgres": (
        "langgraph.checkpoint.postgres.aio",
        "AsyncPostgresSaver",
        "tether.checkpointing._rotators_sql",
        "PostgresRotator",
    ),
    "redis": (
        "langgraph.checkpoint.redis.aio",
        "AsyncRedisSaver",
        "tether.checkpointing._rotators_redis",
        "RedisRotator",
    ),
}


def rotator_for(saver: Any, records: Any) -> Rotator | None:
    """The rewriter for ``saver``'s upstream saver class, or ``None``.

    Args:
        saver: The backend saver.
        records: The record-store driver on the same backend.
    """
    for module_name, class_name, rotator_module, rotator_name in _BASES.values():
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # that backend's extra is not installed
            continue
        if isinstance(saver, getattr(module, class_name)):
            rotator: type[Rotator] = getattr(importlib.import_module(rotator_module), rotator_name)
            return rotator(saver, records)
    return None
