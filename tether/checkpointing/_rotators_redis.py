"""Rotation on Redis: every document, record and step is replaced by compare-and-set.

Redis has no row locks, and a worker may update a document (a retried task's
error write), a record (a tool's commit) or delete a whole thread while a
rotation runs. So each value is re-sealed from what was read and written back
by a Lua script only if the stored value is still exactly that (for a JSON
document: the SHA-1 of its text); otherwise it is read again and retried. A
deleted key is never recreated. The worker's own write is under its own ring,
which already holds the new key (rotation step 2), so it needs nothing more.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from tether.checkpointing._rotators import (
    Counts,
    Rotator,
    ThreadPass,
    sealed_metadata,
    secret_slot,
)
from tether.checkpointing.encryption import EncryptionError

__all__ = ["RedisRotator"]

# KEYS[1]: a JSON document. Its text exactly as stored (a script's reply is not
# reparsed by the client, which JSON.GET's own reply would be).
_DOC_READ = "return redis.call('JSON.GET', KEYS[1], '$')"
# KEYS[1]: a JSON document; ARGV[1]: SHA-1 of its text as read; then path, JSON pairs.
_DOC_CAS = """
local now = redis.call('JSON.GET', KEYS[1], '$')
if (not now) or redis.sha1hex(now) ~= ARGV[1] then return 0 end
for i = 2, #ARGV, 2 do redis.call('JSON.SET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""
# KEYS[1]: a hash; ARGV: field, value as read, new value.
_FIELD_CAS = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""
_ATTEMPTS = 8  # reads of one value racing with writers before giving up
_PAGE = 500


def _glob_escape(text: str) -> str:
    """``text`` matched literally by ``SCAN MATCH`` (``*``, ``?``, ``[`` ... escaped)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# One planned write: (key, script arguments, counts to take back if the write loses).
_Plan = tuple[str, list[str], Counts]


class RedisRotator(Rotator):
    """Rewrites an ``AsyncRedisSaver``'s documents and the record store under its prefix."""

    keys: dict[str, list[str]]

    def __init__(self, saver: Any, records: Any) -> None:
        super().__init__(saver, records)
        client = saver._redis
        self.client = client
        self.doc_read = client.register_script(_DOC_READ)
        self.doc_cas = client.register_script(_DOC_CAS)
        self.field_cas = client.register_script(_FIELD_CAS)
        self.prefix = records._p  # the record store's key prefix

    async def sealed(self) -> str | None:
        if await self.records.get(*secret_slot()) is not None:
            return "its keyed-hash secret"
        # The search index sorts by checkpoint id: the newest checkpoint, in one query.
        async for tup in self.saver.alist(None, limit=1):
            if sealed_metadata(tup.metadata):
                return "its newest checkpoint"
        return None

    async def _scan(self, pattern: str) -> list[str]:
        return [_text(k) async for k in self.client.scan_iter(match=pattern, count=1000)]

    async def threads(self) -> list[str]:
        """Every thread's checkpoint and write document keys, and its records and steps."""
        from langgraph.checkpoint.redis.util import from_storage_safe_id

        saver = self.saver
        found: dict[str, list[str]] = {}
        for prefix in (saver._checkpoint_prefix, saver._checkpoint_write_prefix):
            keys = await self._scan(f"{_glob_escape(prefix)}:*")
            for start in range(0, len(keys), _PAGE):
                chunk = keys[start : start + _PAGE]
                ids = await self.client.json().mget(chunk, "$.thread_id")
                for key, value in zip(chunk, ids, strict=True):
                    if value:
                        found.setdefault(from_storage_safe_id(value[0]), []).append(key)
        for kind in ("thread", "steps"):
            head = f"{self.prefix}:{kind}:"
            for key in await self._scan(f"{_glob_escape(head)}*"):
                found.setdefault(key[len(head) :], [])
        self.keys = found
        return sorted(found)

    async def rewrite(self, one: ThreadPass) -> None:
        await self._settle(one, self.keys.get(one.thread_id, []), self._plan_docs, self.doc_cas)
        await self._settle(one, await self._record_keys(one), self._plan_records, self.field_cas)
        await self._settle(
            one, [f"{self.prefix}:steps:{one.thread_id}"], self._plan_steps, self.field_cas
        )

    async def _settle(
        self,
        one: ThreadPass,
        keys: list[str],
        plan: Callable[[ThreadPass, list[str]], Awaitable[list[_Plan]]],
        script: Any,
    ) -> None:
        """Plan re-seals from what is stored, write them by compare-and-set, redo the losers."""
        for _ in range(_ATTEMPTS):
            if not keys:
                return
            planned = await plan(one, keys)
            if not planned:
                return
            pipe = self.client.pipeline(transaction=False)
            for key, args, _ in planned:
                await script(keys=[key], args=args, client=pipe)
            results = await pipe.execute()
            lost = [p for p, ok in zip(planned, results, strict=True) if not ok]
            for _, _, counts in lost:  # counted again when read again
                one.counts.add(counts, -1)
            keys = sorted({key for key, _, _ in lost})
        raise EncryptionError(
            f"thread {one.thread_id!r} kept changing while it was being rotated; run "
            "`tether keys rotate` again (threads already done stay done)"
        )

    async def _plan_docs(self, one: ThreadPass, keys: list[str]) -> list[_Plan]:
        from langgraph.checkpoint.redis.util import from_storage_safe_id, from_storage_safe_str

        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            await self.doc_read(keys=[key], client=pipe)
        planned: list[_Plan] = []
        for key, raw in zip(keys, await pipe.execute(), strict=True):
            if not raw:
                continue  # deleted since it was listed
            text = raw if isinstance(raw, bytes) else str(raw).encode()  # UTF-8 either way
            (doc,) = json.loads(text)
            ns = from_storage_safe_str(doc["checkpoint_ns"])
            cid = from_storage_safe_id(doc["checkpoint_id"])
            if "checkpoint" not in doc and "task_id" not in doc:
                continue  # the stub aput_writes leaves before a checkpoint exists
            before = one.counts.copy()
            if "checkpoint" in doc:
                sets = _checkpoint_sets(one, doc, ns, cid)
            else:
                sets = _write_sets(one, doc, ns, cid)
            if sets:
                delta = one.counts.copy()
                delta.add(before, -1)
                planned.append((key, [hashlib.sha1(text).hexdigest(), *sets], delta))
        return planned

    async def _record_keys(self, one: ThreadPass) -> list[str]:
        members = await self.client.smembers(f"{self.prefix}:thread:{one.thread_id}")
        head = f"{self.prefix}:rec:"
        return sorted(k for k in map(_text, members) if k.startswith(head))

    async def _plan_records(self, one: ThreadPass, keys: list[str]) -> list[_Plan]:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(key, "kind", "key", "thread_id", "value")
        planned: list[_Plan] = []
        for key, fields in zip(keys, await pipe.execute(), strict=True):
            kind, rec_key, thread_id, value = (None if f is None else _text(f) for f in fields)
            if value is None or thread_id != one.thread_id:
                continue
            before = one.counts.copy()
            new = one.rewrap_record(str(kind), str(rec_key), value)
            if new is not None:
                delta = one.counts.copy()
                delta.add(before, -1)
                planned.append((key, ["value", value, new], delta))
        return planned

    async def _plan_steps(self, one: ThreadPass, keys: list[str]) -> list[_Plan]:
        (key,) = keys
        planned: list[_Plan] = []
        entries = await self.client.hgetall(key)
        for index, value in sorted((int(_text(i)), _text(v)) for i, v in entries.items()):
            before = one.counts.copy()
            new = one.rewrap_step(index, value)
            if new is not None:
                delta = one.counts.copy()
                delta.add(before, -1)
                planned.append((key, [str(index), value, new], delta))
        return planned


def _checkpoint_sets(one: ThreadPass, doc: dict[str, Any], ns: str, cid: str) -> list[str]:
    """JSON paths and values that re-seal a checkpoint document (empty: nothing to do)."""
    checkpoint = doc["checkpoint"]
    stored = doc.get("metadata") or "{}"
    metadata = json.loads(stored) if isinstance(stored, str) else dict(stored)
    sets: list[str] = []
    if one.rewrap_values(checkpoint, ns, unwrap=_from_redis_bytes):
        sets += ["$.checkpoint.channel_values", json.dumps(checkpoint["channel_values"])]
    versions = checkpoint.get("channel_versions", {})
    if one.rewrap_metadata(metadata, ns, cid, versions):
        # Written back in the form it was stored in (upstream keeps a JSON string).
        text = json.dumps(metadata, separators=(",", ":"))
        sets += ["$.metadata", json.dumps(text) if isinstance(stored, str) else text]
    return sets


def _write_sets(one: ThreadPass, doc: dict[str, Any], ns: str, cid: str) -> list[str]:
    type_ = doc.get("type", "")
    blob = base64.b64decode(doc["blob"]) if type_ == "bytes" else None
    new = one.rewrap_write((type_, blob), ns, cid, doc["task_id"], doc["channel"])
    if new is None:
        return []
    return ["$.blob", json.dumps(base64.b64encode(new).decode())]


def _from_redis_bytes(stored: Any) -> Any:
    """The envelope bytes a RedisJSON checkpoint holds as ``{"__bytes__": base64}``."""
    if isinstance(stored, dict) and set(stored) == {"__bytes__"}:
        return base64.b64decode(stored["__bytes__"])
    return stored  # a value stored in clear: counted, never decoded
