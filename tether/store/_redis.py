"""Records for the Redis checkpointer: plain keys under the saver's key prefix.

Layout (``P`` is ``<key_prefix>_tether``, or ``tether`` without a prefix):

* ``P:rec:<kind>:<key>`` - a hash: kind, key, thread_id, value, created_at, seq;
* ``P:order:<kind>`` and ``P:order:<kind>@<thread>`` - sorted sets of record keys,
  scored by a global sequence, for insertion order;
* ``P:steps:<thread>`` (hash index -> value) and ``P:stepseq:<thread>`` (counter);
* ``P:stepchain:<thread>`` (hash index -> ``digest:link``) and ``P:stephead:<thread>``
  (the newest link): the step log's hash chain (:mod:`._chain`), written by the
  script that appends the step; a run's deleted steps leave their entries;
* ``P:thread:<thread>`` - a set of every key of the thread, for deletion, and
  of the run sets that list its records and steps;
* ``P:run:<run_id>`` - a set of the run's record keys and step references
  (``P:steps:<thread>#<index>``), for ``delete_for_runs``.

Inserts run as Lua scripts, so put-if-absent and its index entries are one atomic
step, and a step takes its index in the script that writes it (one round trip,
no gap). The scripts touch several keys, so this layout targets a single Redis
node.
"""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

from tether.checkpointing.redis import records_prefix
from tether.store._chain import ChainRow, merge_rows
from tether.store._sha256_lua import CHAIN_LUA
from tether.store._step_index import WRITTEN, IndexGuesses
from tether.store._types import RawRecord, StepPayload

__all__ = ["RedisDriver", "tether_prefix"]

# A step's index is assigned inside the script that writes the step, so the two
# take one round trip. ARGV "step" is "" (no step), "next" (the next index: the
# stored text does not depend on it) or the index an encrypted text is bound to,
# written there unless the log has moved past it; else the script answers
# {2, next index}. Indexes only grow, so the log's order is the order of writes.
#
# KEYS: record, seq counter, kind order, kind@thread order, thread set, step log,
#       step counter, run set, step chain, chain head
# ARGV: kind, key, thread_id, value, created_at, mode ("insert" | "upsert"), step,
#       step value, run id ("" for none), step digest
# Returns {1, step index or -1} if it wrote, {0, -1} if the record existed and mode
# is "insert" (nothing written), {2, next index} if the step index was taken.
_PUT = (
    CHAIN_LUA
    + """
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and ARGV[6] ~= 'upsert' then return {0, -1} end
local index = -1
if ARGV[7] ~= '' then
  index = tonumber(redis.call('GET', KEYS[7]) or '0')
  if ARGV[7] ~= 'next' then
    if tonumber(ARGV[7]) < index then return {2, index} end
    index = tonumber(ARGV[7])
  end
end
if exists then
  redis.call('HSET', KEYS[1], 'value', ARGV[4])
else
  local seq = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'kind', ARGV[1], 'key', ARGV[2], 'thread_id', ARGV[3],
             'value', ARGV[4], 'created_at', ARGV[5], 'seq', seq)
  redis.call('ZADD', KEYS[3], seq, KEYS[1])
  redis.call('ZADD', KEYS[4], seq, KEYS[1])
  redis.call('SADD', KEYS[5], KEYS[1], KEYS[4])
  if ARGV[9] ~= '' then
    redis.call('HSET', KEYS[1], 'run_id', ARGV[9])
    redis.call('SADD', KEYS[8], KEYS[1])
    redis.call('SADD', KEYS[5], KEYS[8])
  end
end
if index >= 0 then
  redis.call('SET', KEYS[7], tostring(index + 1))
  redis.call('HSET', KEYS[6], tostring(index), ARGV[8])
  chain_step(KEYS[9], KEYS[10], index, ARGV[10])
  if ARGV[9] ~= '' then
    redis.call('SADD', KEYS[8], KEYS[6] .. '#' .. index)
    redis.call('SADD', KEYS[5], KEYS[8])
  end
end
return {1, index}
"""
)
# KEYS: step log, step counter, run set, thread set, step chain, chain head
# ARGV: step ("next" or an index), step value, run id ("" for none), step digest.
# Returns {1, index} if it wrote, {2, next index} if the index was taken.
_APPEND = (
    CHAIN_LUA
    + """
local index = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[1] ~= 'next' then
  if tonumber(ARGV[1]) < index then return {2, index} end
  index = tonumber(ARGV[1])
end
redis.call('SET', KEYS[2], tostring(index + 1))
redis.call('HSET', KEYS[1], tostring(index), ARGV[2])
chain_step(KEYS[5], KEYS[6], index, ARGV[4])
if ARGV[3] ~= '' then
  redis.call('SADD', KEYS[3], KEYS[1] .. '#' .. index)
  redis.call('SADD', KEYS[4], KEYS[3])
end
return {1, index}
"""
)
# KEYS: thread set, step log, step counter, step chain, chain head; ARGV: the tether prefix
_DELETE = """
local runs = ARGV[1] .. ':run:'
local steps = KEYS[2] .. '#'
local members = redis.call('SMEMBERS', KEYS[1])
for _, k in ipairs(members) do
  if string.sub(k, 1, #runs) == runs then
    -- a run set shared with other threads: take out only this thread's entries
    for _, m in ipairs(redis.call('SMEMBERS', k)) do
      local tail = string.sub(m, #steps + 1)
      if redis.call('SISMEMBER', KEYS[1], m) == 1
          or (string.sub(m, 1, #steps) == steps and string.match(tail, '^%d+$')) then
        redis.call('SREM', k, m)
      end
    end
  else
    if redis.call('TYPE', k).ok == 'hash' then
      local kind = redis.call('HGET', k, 'kind')
      if kind then redis.call('ZREM', ARGV[1] .. ':order:' .. kind, k) end
    end
    redis.call('DEL', k)
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return #members
"""
# KEYS: the run sets; ARGV: the tether prefix
_DELETE_RUNS = """
local p = ARGV[1]
local recs, steps = p .. ':rec:', p .. ':steps:'
for _, run in ipairs(KEYS) do
  for _, m in ipairs(redis.call('SMEMBERS', run)) do
    if string.sub(m, 1, #recs) == recs then
      local f = redis.call('HMGET', m, 'kind', 'thread_id')
      if f[1] and f[2] then
        redis.call('ZREM', p .. ':order:' .. f[1], m)
        redis.call('ZREM', p .. ':order:' .. f[1] .. '@' .. f[2], m)
        redis.call('SREM', p .. ':thread:' .. f[2], m, run)
      end
      redis.call('DEL', m)
    elseif string.sub(m, 1, #steps) == steps then
      local at = string.match(m, '^.*()#')
      local log = string.sub(m, 1, at - 1)
      redis.call('HDEL', log, string.sub(m, at + 1))
      redis.call('SREM', p .. ':thread:' .. string.sub(log, #steps + 1), run)
    end
  end
  redis.call('DEL', run)
end
return #KEYS
"""


def tether_prefix(checkpoint_prefix: str) -> str:
    """The key prefix for tether's records, derived from the saver's checkpoint prefix.

    Distinct for distinct key prefixes (``acme`` and ``acme_`` included); see
    :mod:`tether.checkpointing.redis._prefixes`.
    """
    return records_prefix(checkpoint_prefix)


def _answer(reply: Any) -> tuple[int, int]:
    status, index = reply
    return int(status), int(index)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis glob pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _raw(fields: dict[Any, Any]) -> RawRecord:
    f = {_text(k): _text(v) for k, v in fields.items()}
    return RawRecord(
        f["kind"], f["key"], f["thread_id"], f["value"], float(f["created_at"]), f.get("run_id")
    )


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
        self._append = self._redis.register_script(_APPEND)
        self._delete = self._redis.register_script(_DELETE)
        self._delete_runs = self._redis.register_script(_DELETE_RUNS)
        # The index each thread's next encrypted step will try (the text is bound to it).
        self._guesses = IndexGuesses()

    def _rec(self, kind: str, key: str) -> str:
        return f"{self._p}:rec:{kind}:{key}"

    def _chain_keys(self, thread: str) -> tuple[str, str]:
        return f"{self._p}:stepchain:{thread}", f"{self._p}:stephead:{thread}"

    def _run(self, run_id: str | None) -> str:
        # Without a run the key is named but never written (scripts check the run id).
        return f"{self._p}:run:{run_id or ''}"

    async def _write(
        self, raw: RawRecord, mode: str, step: StepPayload | None = None
    ) -> tuple[int, int]:
        p, kind, thread = self._p, raw.kind, raw.thread_id
        keys = [
            self._rec(kind, raw.key),
            f"{p}:seq",
            f"{p}:order:{kind}",
            f"{p}:order:{kind}@{thread}",
            f"{p}:thread:{thread}",
            f"{p}:steps:{thread}",
            f"{p}:stepseq:{thread}",
            self._run(raw.run_id),
            *self._chain_keys(thread),
        ]
        args = [kind, raw.key, thread, raw.payload, repr(raw.created_at), mode]
        run, digest = raw.run_id or "", "" if step is None else step.digest

        async def put(index: str, value: str) -> tuple[int, int]:
            return _answer(await self._put(keys=keys, args=[*args, index, value, run, digest]))

        if step is None:
            return await put("", "")
        return await self._guesses.write(thread, step, put)

    async def put_with_step(self, raw: RawRecord, replace: bool, step: StepPayload) -> int | None:
        status, index = await self._write(raw, "upsert" if replace else "insert", step)
        return index if status == WRITTEN else None

    async def insert(self, raw: RawRecord) -> bool:
        status, _ = await self._write(raw, "insert")
        return status == WRITTEN

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
        keys = [
            f"{self._p}:steps:{thread_id}",
            f"{self._p}:stepseq:{thread_id}",
            self._run(step.run_id),
            f"{self._p}:thread:{thread_id}",
            *self._chain_keys(thread_id),
        ]
        run = step.run_id or ""

        async def append(index: str, value: str) -> tuple[int, int]:
            return _answer(await self._append(keys=keys, args=[index, value, run, step.digest]))

        _, index = await self._guesses.write(thread_id, step, append)
        return index

    async def steps(self, thread_id: str) -> builtins.list[tuple[int, str]]:
        entries = await self._redis.hgetall(f"{self._p}:steps:{thread_id}")
        return sorted((int(_text(i)), _text(v)) for i, v in entries.items())

    async def chain(self, thread_id: str) -> builtins.list[ChainRow]:
        chain_key, _ = self._chain_keys(thread_id)
        pipe = self._redis.pipeline(transaction=True)
        pipe.hgetall(f"{self._p}:steps:{thread_id}")
        pipe.hgetall(chain_key)
        entries, links = await pipe.execute()
        steps = [(int(_text(i)), _text(v)) for i, v in entries.items()]
        chain = []
        for i, entry in links.items():
            digest, _, link = _text(entry).partition(":")
            chain.append((int(_text(i)), digest, link))
        return merge_rows(steps, chain)

    async def step_threads(self) -> builtins.list[str]:
        threads: set[str] = set()
        for family in ("steps", "stepchain"):
            head = f"{self._p}:{family}:"
            async for key in self._redis.scan_iter(match=_glob_escape(head) + "*", count=1000):
                threads.add(_text(key)[len(head) :])
        return sorted(threads)

    async def delete_thread(self, thread_id: str) -> None:
        keys = [
            f"{self._p}:thread:{thread_id}",
            f"{self._p}:steps:{thread_id}",
            f"{self._p}:stepseq:{thread_id}",
            *self._chain_keys(thread_id),
        ]
        await self._delete(keys=keys, args=[self._p])
        self._guesses.forget(thread_id)

    async def delete_runs(self, run_ids: builtins.list[str]) -> None:
        keys = [self._run(run_id) for run_id in run_ids]
        await self._delete_runs(keys=keys, args=[self._p])
