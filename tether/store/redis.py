"""Records for the Redis checkpointer: plain keys under the saver's key prefix.

Layout (``P`` is ``<key_prefix>_tether``, or ``tether`` without a prefix):

* ``P:rec:<kind>:<key>`` - a hash: kind, key, thread_id, value, created_at, seq;
* ``P:order:<kind>`` and ``P:order:<kind>@<thread>`` - sorted sets of record keys,
  scored by a global sequence, for insertion order;
* ``P:steps:<thread>`` (hash index -> value) and ``P:stepseq:<thread>`` (counter);
* ``P:thread:<thread>`` - a set of every key of the thread, for deletion.

Inserts run as Lua scripts, so put-if-absent and its index entries are one atomic
step. The scripts touch several keys, so this layout targets a single Redis node.
"""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

from tether.checkpointing.redis.prefixes import records_prefix
from tether.store.record import RawRecord, StepPayload

__all__ = ["RedisDriver", "tether_prefix"]

# KEYS: record, seq counter, kind order, kind@thread order, thread set, step log
# ARGV: kind, key, thread_id, value, created_at, mode ("insert" | "upsert"),
#       step index ("" for no step), step value
# Returns 1 if it wrote, 0 if the record existed and mode is "insert".
_PUT = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if ARGV[6] ~= 'upsert' then return 0 end
  redis.call('HSET', KEYS[1], 'value', ARGV[4])
else
  local seq = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'kind', ARGV[1], 'key', ARGV[2], 'thread_id', ARGV[3],
             'value', ARGV[4], 'created_at', ARGV[5], 'seq', seq)
  redis.call('ZADD', KEYS[3], seq, KEYS[1])
  redis.call('ZADD', KEYS[4], seq, KEYS[1])
  redis.call('SADD', KEYS[5], KEYS[1], KEYS[4])
end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[6], ARGV[7], ARGV[8]) end
return 1
"""
# KEYS: thread set, step log, step counter; ARGV: the tether prefix
_DELETE = """
local members = redis.call('SMEMBERS', KEYS[1])
for _, k in ipairs(members) do
  if redis.call('TYPE', k).ok == 'hash' then
    local kind = redis.call('HGET', k, 'kind')
    if kind then redis.call('ZREM', ARGV[1] .. ':order:' .. kind, k) end
  end
  redis.call('DEL', k)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return #members
"""


def tether_prefix(checkpoint_prefix: str) -> str:
    """The key prefix for tether's records, derived from the saver's checkpoint prefix.

    Distinct for distinct key prefixes (``acme`` and ``acme_`` included); see
    :mod:`tether.checkpointing.redis.prefixes`.
    """
    return records_prefix(checkpoint_prefix)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _raw(fields: dict[Any, Any]) -> RawRecord:
    f = {_text(k): _text(v) for k, v in fields.items()}
    return RawRecord(f["kind"], f["key"], f["thread_id"], f["value"], float(f["created_at"]))


class RedisDriver:
    """Uses the saver's Redis client (``saver._redis``).

    Args:
        saver: An ``AsyncRedisSaver`` (tether's ``RedisSaver``).
    """

    def __init__(self, saver: Any) -> None:
        self._redis = saver._redis
        self.loop: asyncio.AbstractEventLoop | None = saver.loop
        self._p = tether_prefix(saver._checkpoint_prefix)
        self._put = self._redis.register_script(_PUT)
        self._delete = self._redis.register_script(_DELETE)

    def _rec(self, kind: str, key: str) -> str:
        return f"{self._p}:rec:{kind}:{key}"

    async def _write(self, raw: RawRecord, mode: str, step: tuple[int, str] | None = None) -> bool:
        p, kind, thread = self._p, raw.kind, raw.thread_id
        keys = [
            self._rec(kind, raw.key),
            f"{p}:seq",
            f"{p}:order:{kind}",
            f"{p}:order:{kind}@{thread}",
            f"{p}:thread:{thread}",
            f"{p}:steps:{thread}",
        ]
        index, value = (str(step[0]), step[1]) if step else ("", "")
        args = [kind, raw.key, thread, raw.payload, repr(raw.created_at), mode, index, value]
        return bool(await self._put(keys=keys, args=args))

    async def put_with_step(self, raw: RawRecord, replace: bool, step: StepPayload) -> int | None:
        # The index is reserved first (ciphertexts are bound to it); if the record
        # already existed the reserved index stays unused, a gap steps() skips.
        index = int(await self._redis.incr(f"{self._p}:stepseq:{raw.thread_id}")) - 1
        mode = "upsert" if replace else "insert"
        written = await self._write(raw, mode, (index, step.encode(index)))
        return index if written else None

    async def insert(self, raw: RawRecord) -> bool:
        return await self._write(raw, "insert")

    async def upsert(self, raw: RawRecord) -> None:
        await self._write(raw, "upsert")

    async def get(self, kind: str, key: str) -> RawRecord | None:
        fields = await self._redis.hgetall(self._rec(kind, key))
        return _raw(fields) if fields else None

    async def list(self, kind: str, thread_id: str | None) -> builtins.list[RawRecord]:
        order = f"{self._p}:order:{kind}" + ("" if thread_id is None else f"@{thread_id}")
        keys = await self._redis.zrange(order, 0, -1)
        if not keys:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for k in keys:
            pipe.hgetall(k)
        return [_raw(fields) for fields in await pipe.execute() if fields]

    async def append_step(self, thread_id: str, step: StepPayload) -> int:
        # INCR hands out each index once, on every worker; a crash before HSET
        # leaves a gap, which steps() skips.
        index = int(await self._redis.incr(f"{self._p}:stepseq:{thread_id}")) - 1
        await self._redis.hset(f"{self._p}:steps:{thread_id}", str(index), step.encode(index))
        return index

    async def steps(self, thread_id: str) -> builtins.list[tuple[int, str]]:
        entries = await self._redis.hgetall(f"{self._p}:steps:{thread_id}")
        return sorted((int(_text(i)), _text(v)) for i, v in entries.items())

    async def delete_thread(self, thread_id: str) -> None:
        keys = [
            f"{self._p}:thread:{thread_id}",
            f"{self._p}:steps:{thread_id}",
            f"{self._p}:stepseq:{thread_id}",
        ]
        await self._delete(keys=keys, args=[self._p])
