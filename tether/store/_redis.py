"""Records for the Redis checkpointer: plain keys under the saver's key prefix.

Layout (``P`` is ``<key_prefix>_tether``, or ``tether`` without a prefix):

* ``P:rec:<kind>:<key>`` - a hash: kind, key, thread_id, value, created_at, seq;
* ``P:order:<kind>`` and ``P:order:<kind>@<thread>`` - sorted sets of record keys,
  scored by a global sequence, for insertion order;
* ``P:steps:<thread>`` (hash index -> value) and ``P:stepseq:<thread>`` (counter);
* ``P:stepchain:<thread>`` (hash index -> ``digest:link``) and ``P:stephead:<thread>``
  (the newest link): the step log's hash chain (:mod:`._chain`), written by the
  script that appends the step, which checks the head the link was computed
  from; a run's deleted steps leave their entries;
* ``P:thread:<thread>`` - a set of every key of the thread, for deletion, and
  of the run sets that list its records and steps;
* ``P:run:<run_id>`` - a set of the run's record keys and step references
  (``P:steps:<thread>#<index>``), for ``delete_for_runs``.

Inserts run as Lua scripts, so put-if-absent and its index entries are one atomic
step. A step's chain link is computed here, from the log's end as this process
last saw it, and the script that writes the step checks that end first
(compare-and-set, :mod:`._chain_tail`): one round trip when the guess is right,
no gap in the log, one line of links under concurrent writers. The scripts touch
several keys, so this layout targets a single Redis node.
"""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

from tether.checkpointing.redis import records_prefix
from tether.store._chain import ChainRow, merge_rows
from tether.store._chain_tail import WRITTEN, ChainTails
from tether.store._types import RawRecord, StepPayload

__all__ = ["RedisDriver", "tether_prefix"]

# A step is written only where the writer expects it (:mod:`._chain_tail`): the
# writer computed its link from the index and head link it expects at the end of
# the thread's log; if the log's next index or head differ, the script writes
# nothing and answers {2, next index, head}, and the writer computes the link
# again and retries. Indexes only grow, so the log's order is the order of writes.
_TAIL_LUA = """
local function moved(seq_key, head_key, index, head)
  local next_index = tonumber(redis.call('GET', seq_key) or '0')
  local current = redis.call('GET', head_key) or string.rep('0', 64)
  if next_index ~= index or current ~= head then return {2, next_index, current} end
  return nil
end
local function chain(seq_key, chain_key, head_key, index, digest, link)
  redis.call('SET', seq_key, tostring(index + 1))
  redis.call('HSET', chain_key, tostring(index), digest .. ':' .. link)
  redis.call('SET', head_key, link)
end
"""
# KEYS: record, seq counter, kind order, kind@thread order, thread set, step log,
#       step counter, run set, step chain, chain head
# ARGV: kind, key, thread_id, value, created_at, mode ("insert" | "upsert"), step
#       index ("" for no step), step value, run id ("" for none), step digest,
#       expected head link, step link
# Returns {1, step index or -1} if it wrote, {0, -1} if the record existed and mode
# is "insert" (nothing written), {2, next index, head} if the log's end moved.
_PUT = (
    _TAIL_LUA
    + """
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and ARGV[6] ~= 'upsert' then return {0, -1} end
local index = -1
if ARGV[7] ~= '' then
  index = tonumber(ARGV[7])
  local taken = moved(KEYS[7], KEYS[10], index, ARGV[11])
  if taken then return taken end
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
  redis.call('HSET', KEYS[6], tostring(index), ARGV[8])
  chain(KEYS[7], KEYS[9], KEYS[10], index, ARGV[10], ARGV[12])
  if ARGV[9] ~= '' then
    redis.call('SADD', KEYS[8], KEYS[6] .. '#' .. index)
    redis.call('SADD', KEYS[5], KEYS[8])
  end
end
return {1, index}
"""
)
# KEYS: step log, step counter, run set, thread set, step chain, chain head
# ARGV: step index, step value, run id ("" for none), step digest, expected head
#       link, step link.
# Returns {1, index} if it wrote, {2, next index, head} if the log's end moved.
_APPEND = (
    _TAIL_LUA
    + """
local index = tonumber(ARGV[1])
local taken = moved(KEYS[2], KEYS[6], index, ARGV[5])
if taken then return taken end
redis.call('HSET', KEYS[1], tostring(index), ARGV[2])
chain(KEYS[2], KEYS[5], KEYS[6], index, ARGV[4], ARGV[6])
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


def _answer(reply: Any) -> tuple[int, int, str]:
    """``(status, index, head)`` of a write script (the head only when the log moved)."""
    status, index, *head = reply
    return int(status), int(index), _text(head[0]) if head else ""


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
        # The end of each thread's log as this process last saw it (the next link's base).
        self._tails = ChainTails()

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
        run = raw.run_id or ""
        if step is None:
            status, index, _ = _answer(await self._put(keys=keys, args=[*args, "", "", run]))
            return status, index

        async def put(index: int, head: str, text: str, link: str) -> tuple[int, int, str]:
            tail = [str(index), text, run, step.digest, head, link]
            return _answer(await self._put(keys=keys, args=[*args, *tail]))

        return await self._tails.write(thread, step, put)

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

        async def append(index: int, head: str, text: str, link: str) -> tuple[int, int, str]:
            args = [str(index), text, run, step.digest, head, link]
            return _answer(await self._append(keys=keys, args=args))

        _, index = await self._tails.write(thread_id, step, append)
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
        self._tails.forget(thread_id)

    async def delete_runs(self, run_ids: builtins.list[str]) -> None:
        keys = [self._run(run_id) for run_id in run_ids]
        await self._delete_runs(keys=keys, args=[self._p])
