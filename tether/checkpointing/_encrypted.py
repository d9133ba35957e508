"""The encryption layer: state is sealed before any backend sees it.

:class:`EncryptedSaver` wraps any saver. Every channel value, every pending
write and every metadata key LangGraph does not filter on becomes an AES-256-GCM
envelope (``bytes``) that the backend stores like any other bytes value: a blob
row in PostgreSQL (never inline JSONB), a msgpack field in SQLite, base64 in
RedisJSON. Values are serialized with the backend's own serde first.

Associated data (:mod:`tether.checkpointing.binding`) binds each envelope to
where it lives, so a ciphertext moved to another thread, namespace, checkpoint,
task or channel fails to decrypt:

* channel value: thread, namespace, channel, channel version (a blob is shared
  by every checkpoint that has that version, so not the checkpoint id);
* pending write: thread, namespace, checkpoint id, task id, channel;
* sealed metadata: thread, namespace, checkpoint id and every channel's
  version, so the versions of one checkpoint cannot be mixed with another's.

Every thread's values are sealed under the thread's own data key (envelope
version 3), kept wrapped by the ring in the record store beside the
checkpoints (:mod:`tether.store._data_keys`): erasing the thread destroys it,
which makes every copy of the thread's ciphertext unreadable. Values written
before data keys (versions 1 and 2, under a ring key) still read.

Metadata keys stored in clear outside the policy (:data:`CLEAR_METADATA_KEYS`
and ``searchable_metadata``) are dropped on read: nobody without the key can
add metadata beside the sealed blob.
"""

from __future__ import annotations

import base64
from binascii import b2a_base64
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)

from tether.checkpointing import binding
from tether.checkpointing._bridge import closing_listing
from tether.checkpointing._delegating import DelegatingSaver
from tether.checkpointing.binding import name_part
from tether.checkpointing.encryption import (
    DataKey,
    KeyRing,
    PlaintextRefusedError,
    aad,
    aad_part,
    data_key_named,
    data_key_named_in_base64,
)
from tether.errors import ConfigurationError

if TYPE_CHECKING:
    from tether.store import DataKeyCache

__all__ = ["CLEAR_METADATA_KEYS", "SEALED_METADATA_KEY", "EncryptedSaver"]

SEALED_METADATA_KEY = "__tether_sealed__"
"""The metadata key holding the encrypted remainder of a checkpoint's metadata."""
CLEAR_METADATA_KEYS = frozenset({"source", "step", "parents", "run_id"})
"""Metadata LangGraph and the backends filter or delete on; stored in clear."""
_RECENT_THREADS = 256  # threads whose last envelopes are kept for reuse
_ID_KEYS = ("thread_id", "checkpoint_ns", "checkpoint_id", "run_id")


def _where(thread_id: str, ns: str, **parts: str) -> str:
    extra = "".join(f", {k.replace('_', ' ')} {v!r}" for k, v in parts.items())
    return f"thread {thread_id!r}, namespace {ns!r}{extra}"


def _plaintext_refused(where: str) -> PlaintextRefusedError:
    return PlaintextRefusedError(
        f"value ({where}) is stored in clear but encryption is on; refusing it. "
        "To migrate an unencrypted store, open it with "
        "KeyRing(..., allow_plaintext=True) or TETHER_ENCRYPTION_ALLOW_PLAINTEXT=1 "
        "(see docs/encryption.md, migration mode)"
    )


def _wanted_by(tup: CheckpointTuple) -> str | None:
    """The data key a stored checkpoint tuple needs, if any of it is sealed under one."""
    sealed = tup.metadata.get(SEALED_METADATA_KEY) if tup.metadata else None
    if isinstance(sealed, str):
        want = data_key_named_in_base64(sealed)
        if want is not None:
            return want
    for v in tup.checkpoint["channel_values"].values():
        if (want := data_key_named(v)) is not None:
            return want
    for _, _, v in tup.pending_writes or ():
        if (want := data_key_named(v)) is not None:
            return want
    return None


class _Scope:
    """One thread and namespace: its associated-data prefixes and last envelopes."""

    __slots__ = ("channel", "key_id", "last", "metadata", "write")

    def __init__(self, thread_id: str, ns: str) -> None:
        self.channel = binding.scope(binding.CHANNEL, thread_id, ns)
        self.write = binding.scope(binding.WRITE, thread_id, ns)
        self.metadata = binding.scope(binding.METADATA, thread_id, ns)
        # channel -> (version, value object, envelope) of the last checkpoint written
        self.last: dict[str, tuple[Any, Any, bytes]] = {}
        self.key_id: str | None = None  # the data key those envelopes are sealed under


class EncryptedSaver(DelegatingSaver):
    """Encrypts channel values, pending writes and metadata for any backend.

    Args:
        inner: The saver that stores the envelopes.
        encryption: The key ring (also exposed as ``.encryption`` for other
            packages' records; see :mod:`tether.checkpointing.encryption`).
        searchable_metadata: Custom metadata keys to keep in clear so that
            ``list(filter=...)`` can use the backend's index for them.
    """

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        encryption: KeyRing,
        *,
        searchable_metadata: Iterable[str] = (),
    ) -> None:
        if isinstance(searchable_metadata, str):
            raise ConfigurationError(
                f"searchable_metadata must be a list of metadata keys, e.g. "
                f"({searchable_metadata!r},), not a single string"
            )
        searchable = tuple(searchable_metadata)
        if SEALED_METADATA_KEY in searchable:
            raise ConfigurationError(
                f"searchable_metadata may not list {SEALED_METADATA_KEY!r}: the encryption "
                "layer stores the sealed metadata under that key"
            )
        super().__init__(inner)
        # Called at every step for every channel: skip the forwarding method.
        self.get_next_version = inner.get_next_version  # type: ignore[method-assign]
        self.encryption = encryption
        self.clear_metadata_keys = CLEAR_METADATA_KEYS | frozenset(searchable)
        self._scopes: dict[tuple[str, str], _Scope] = {}  # most recently used last
        self._type_heads: dict[str, bytes] = {}  # serde type name -> plaintext prefix
        self._no_hidden: bytes | None = None  # plaintext of empty sealed metadata
        self._records: Any = None  # the record store keeping the threads' data keys
        self._keys: DataKeyCache | None = None

    # -- data keys ---------------------------------------------------------
    def _key_store(self) -> Any:
        """The record store beside the checkpoints, or ``False`` (a backend without one)."""
        if self._records is None:
            from tether.store import store_for  # the store package builds on this one

            try:
                self._records = store_for(self)
            except ConfigurationError:
                self._records = False  # not a tether backend: ring keys only
            else:
                self._keys = self._records._data_keys
        return self._records

    async def _data_key(
        self, thread_id: str, *, create: bool, want: str | None = None
    ) -> DataKey | None:
        """The thread's data key (created on first write), from memory when cached."""
        if not create and want is None:
            return None
        keys = self._keys
        if keys is not None and (key := keys.get(str(thread_id), want)) is not None:
            return key
        records = self._key_store()
        if records is False:
            return None
        return await records.data_key(str(thread_id), create=create, want=want)  # type: ignore[no-any-return]

    # -- values ------------------------------------------------------------
    def _plain(self, value: Any) -> bytes:
        """The envelope's plaintext: the serde's type name (length-prefixed), then its bytes."""
        type_, payload = self.serde.dumps_typed(value)
        return (self._type_heads.get(type_) or self._type_head(type_)) + payload

    def _type_head(self, type_: str) -> bytes:
        raw = type_.encode()
        head = bytes([len(raw)]) + raw
        if len(self._type_heads) < 64:
            self._type_heads[type_] = head
        return head

    def _open(
        self,
        value: Any,
        data: bytes,
        where: str,
        v1_data: bytes | None = None,
        key: DataKey | None = None,
    ) -> Any:
        if not self.encryption.is_envelope(value):
            if self.encryption.allow_plaintext:
                return value
            raise _plaintext_refused(where)
        plain = self.encryption.decrypt(value, data, where, v1_aad=v1_data, data_key=key)
        end = 1 + plain[0]
        return self.serde.loads_typed((plain[1:end].decode(), plain[end:]))

    # -- checkpoints -------------------------------------------------------
    def _scope(self, thread_id: str, ns: str) -> _Scope:
        key = (thread_id, ns)
        scopes = self._scopes
        scope = scopes.pop(key, None)
        if scope is None:
            scope = _Scope(str(thread_id), ns)
            if len(scopes) >= _RECENT_THREADS:
                scopes.pop(next(iter(scopes)), None)
        scopes[key] = scope
        return scope

    def _seal_put(
        self,
        thread_id: str,
        ns: str,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        key: DataKey | None,
    ) -> tuple[Checkpoint, CheckpointMetadata]:
        """The checkpoint and metadata to store, sealed with one call to the key ring."""
        scope = self._scope(thread_id, ns)
        key_id = None if key is None else key.key_id
        if scope.key_id != key_id:  # a new data key (the thread was erased): seal afresh
            scope.last, scope.key_id = {}, key_id
        versions = checkpoint["channel_versions"]
        dumps, heads, prefix = self.serde.dumps_typed, self._type_heads, scope.channel
        # LangGraph passes every channel's value at every step, most of them
        # unchanged: reuse the envelope of the same object at the same version.
        previous = scope.last
        current: dict[str, tuple[Any, Any, bytes]] = {}
        values: dict[str, Any] = {}
        fresh: list[tuple[str, Any, Any]] = []
        todo: list[tuple[bytes, bytes]] = []
        for ch, v in checkpoint["channel_values"].items():
            version = versions.get(ch)
            cached = previous.get(ch)
            if cached is not None and cached[1] is v and cached[0] == version:
                values[ch] = cached[2]
                current[ch] = cached
            else:
                fresh.append((ch, version, v))
                # _plain() and binding.channel(), inlined: this loop runs for every value.
                type_, payload = dumps(v)
                raw = ("" if version is None else str(version)).encode()
                todo.append(
                    (
                        (heads.get(type_) or self._type_head(type_)) + payload,
                        prefix + name_part(ch) + len(raw).to_bytes(4, "big") + raw,
                    )
                )
        clear, hidden = self._split_metadata(metadata)
        bound = scope.metadata + aad_part(checkpoint["id"]) + binding.versions(versions)
        todo.append((hidden, bound))
        envelopes = self.encryption.encrypt_many(todo, data_key=key)
        for (ch, version, v), envelope in zip(fresh, envelopes, strict=False):  # + metadata's
            values[ch] = envelope
            current[ch] = (version, v, envelope)
        scope.last = current
        clear[SEALED_METADATA_KEY] = b2a_base64(envelopes[-1], newline=False).decode()
        sealed = checkpoint.copy()
        sealed["channel_values"] = values
        return sealed, clear  # type: ignore[return-value]

    def _split_metadata(self, metadata: CheckpointMetadata) -> tuple[dict[str, Any], bytes]:
        """The metadata kept in clear, and the plaintext of the rest (always sealed)."""
        keys = self.clear_metadata_keys
        clear = {k: v for k, v in metadata.items() if k in keys}
        if len(clear) == len(metadata):
            if self._no_hidden is None:
                self._no_hidden = self._plain({})
            return clear, self._no_hidden
        return clear, self._plain({k: v for k, v in metadata.items() if k not in keys})

    async def _opened(self, tup: CheckpointTuple) -> CheckpointTuple:
        want = _wanted_by(tup)
        key = (
            None
            if want is None
            else await self._data_key(
                tup.config["configurable"]["thread_id"], create=False, want=want
            )
        )
        return self._open_tuple(tup, key)

    def _open_tuple(self, tup: CheckpointTuple, key: DataKey | None = None) -> CheckpointTuple:
        conf = tup.config["configurable"]
        thread_id, ns, cid = conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        checkpoint = tup.checkpoint.copy()
        versions = checkpoint["channel_versions"]
        checkpoint["channel_values"] = {
            ch: self._open(
                v,
                binding.channel(thread_id, ns, ch, versions.get(ch)),
                _where(thread_id, ns, channel=ch),
                None,
                key,
            )
            for ch, v in tup.checkpoint["channel_values"].items()
        }
        return CheckpointTuple(
            tup.config,
            checkpoint,
            self._open_metadata(tup.metadata, thread_id, ns, cid, versions, key),  # type: ignore[arg-type]
            tup.parent_config,
            self._open_writes(tup.pending_writes, thread_id, ns, cid, key),
        )

    def _open_metadata(  # noqa: PLR0917 - where the metadata lives, then the key
        self,
        stored: CheckpointMetadata,
        thread_id: str,
        ns: str,
        cid: str,
        versions: Any,
        key: DataKey | None = None,
    ) -> dict[str, Any]:
        """The clear keys the policy allows, plus the sealed rest (bound to ``versions``)."""
        sealed = stored.get(SEALED_METADATA_KEY)
        where = _where(thread_id, ns, checkpoint=cid, part="metadata")
        if not isinstance(sealed, str):
            if not self.encryption.allow_plaintext:
                raise _plaintext_refused(where)
            return dict(stored)  # written in clear before encryption was on: all of it
        # Clear keys outside the policy were not written by this layer: drop them,
        # so a row edited without the key cannot add metadata (or match a filter).
        keys = self.clear_metadata_keys
        metadata = {k: v for k, v in stored.items() if k in keys}
        blob = base64.b64decode(sealed)
        v1 = binding.metadata_v1(thread_id, ns, cid) if blob[4:5] == b"\x01" else None
        metadata.update(
            self._open(blob, binding.metadata(thread_id, ns, cid, versions), where, v1, key)
        )
        return metadata

    def _open_writes(
        self,
        writes: list[tuple[str, str, Any]] | None,
        thread_id: str,
        ns: str,
        cid: str,
        key: DataKey | None = None,
    ) -> list[tuple[str, str, Any]] | None:
        if writes is None:
            return None
        return [
            (
                task_id,
                ch,
                self._open(
                    v,
                    binding.write(thread_id, ns, cid, task_id, ch),
                    _where(thread_id, ns, checkpoint=cid, task=task_id, channel=ch),
                    None,
                    key,
                ),
            )
            for task_id, ch, v in writes
        ]

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = await self.inner.aget_tuple(config)
        return None if tup is None else await self._opened(tup)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # Sealed keys cannot be matched by the backend: filter them after decrypting.
        clear = {k: v for k, v in (filter or {}).items() if k in self.clear_metadata_keys}
        sealed = {k: v for k, v in (filter or {}).items() if k not in clear}
        inner_limit = None if sealed else limit
        seen = 0
        listing = self.inner.alist(config, filter=clear or None, before=before, limit=inner_limit)
        # Closed here, not by the garbage collector, when this stops early.
        async with closing_listing(listing) as tuples:
            async for tup in tuples:
                opened = await self._opened(tup)
                if any(opened.metadata.get(k) != v for k, v in sealed.items()):
                    continue
                yield opened
                seen += 1
                if limit is not None and seen >= limit:
                    return

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        conf = config["configurable"]
        thread_id, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        # The backend would merge config["metadata"] and extra configurable keys into
        # the stored metadata in clear; merge them here, then hand it only the ids.
        full = get_checkpoint_metadata(config, metadata)
        inner_conf = {k: conf[k] for k in _ID_KEYS if k in conf}
        inner_conf["checkpoint_ns"] = ns
        if self.encryption.allow_plaintext:
            # Migrating: an unchanged channel may only exist as a plaintext value
            # PostgresSaver kept inline in an older row, which no longer applies once
            # the value is an envelope; store a blob for every channel present.
            values = checkpoint["channel_values"]
            stored = {k: v for k, v in checkpoint["channel_versions"].items() if k in values}
            new_versions = {**stored, **new_versions}
        key = await self._data_key(thread_id, create=True)
        sealed, clear = self._seal_put(thread_id, ns, checkpoint, full, key)
        return await self.inner.aput({"configurable": inner_conf}, sealed, clear, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        conf = config["configurable"]
        thread_id, ns, cid = conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        if not writes:
            await self.inner.aput_writes(config, writes, task_id, task_path)
            return
        plain = self._plain
        key = await self._data_key(thread_id, create=True)
        scope = self._scopes.get((thread_id, ns)) or self._scope(thread_id, ns)
        prefix = scope.write + aad(cid, task_id)
        envelopes = self.encryption.encrypt_many(
            [(plain(v), prefix + name_part(ch)) for ch, v in writes], data_key=key
        )
        sealed = [(ch, envelopes[i]) for i, (ch, _) in enumerate(writes)]
        await self.inner.aput_writes(config, sealed, task_id, task_path)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread, re-encrypting every value for the target thread.

        Ciphertexts are bound to their thread, so a byte copy would not decrypt
        under the target; this reads the source through the layer and writes the
        target through it, oldest checkpoint first (Redis's "latest" pointer
        follows the last write). Writes keep their task ids and order.
        """
        source = [t async for t in self.alist({"configurable": {"thread_id": source_thread_id}})]
        source.sort(
            key=lambda t: (
                t.config["configurable"].get("checkpoint_ns", ""),
                t.config["configurable"]["checkpoint_id"],
            )
        )
        for tup in source:
            conf = tup.config["configurable"]
            target: dict[str, Any] = {
                "thread_id": target_thread_id,
                "checkpoint_ns": conf.get("checkpoint_ns", ""),
            }
            if tup.parent_config:
                target["checkpoint_id"] = tup.parent_config["configurable"]["checkpoint_id"]
            values = tup.checkpoint["channel_values"]
            versions = {k: v for k, v in tup.checkpoint["channel_versions"].items() if k in values}
            stored = await self.aput(
                {"configurable": target}, tup.checkpoint, tup.metadata, versions
            )
            by_task: dict[str, list[tuple[str, Any]]] = {}
            for task_id, ch, value in tup.pending_writes or []:
                by_task.setdefault(task_id, []).append((ch, value))
            for task_id, task_writes in by_task.items():
                await self.aput_writes(stored, task_writes, task_id)
