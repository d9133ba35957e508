"""The retention sweep on PostgreSQL: throughput, peak memory by count, workers' step latency.

N threads (default 100,000) are generated directly in SQL, each as a finished
run leaves it: the thread row (500 B of values), one ``success`` run (1 kB of
input) with 5 events, 3 checkpoints (800 B of channel values each) with a blob
and 2 pending writes each, 4 step-log records with token usage, and a durable tool's record. Thread
``g`` was last active ``g`` seconds after a base time, so a policy of
``success > 30d`` swept at ``base + 30d + c`` seconds deletes exactly the ``c``
oldest threads. The sweep runs in three stages (10 %, 30 % and 60 % of N):

* throughput: threads examined (and deleted) per second, each with its audit
  summary written first;
* peak memory: this process's RSS, sampled every 20 ms during each stage,
  above its level before the stage; it stays flat as the stage grows because
  the sweep holds one batch at a time;
* latency: a separate process plays a running worker's step (a checkpoint
  write and a step-log append on a live thread, back to back) for the last
  stage's duration, with no sweep first and then beside the sweep; its p50
  and p95 are compared.

Usage: ``python bench/retention_sweep.py [--threads 100000] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from _runtime import machine, percentile, postgres_databases

from tether.retention import RetentionPolicy, Rule, sweep
from tether.runtime import Runtime

BASE = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = RetentionPolicy(rules=(Rule("success", timedelta(days=30)),), batch_size=500)
STAGES = (0.1, 0.3, 0.6)
CHUNK = 5000

_THREADS = """
INSERT INTO tether_threads (thread_id, tenant_id, status, state_values, created_at, updated_at,
                            state_updated_at)
SELECT 'bt-' || g, '', 'idle', '{"v": "' || repeat('v', 500) || '"}', ts, ts, ts
  FROM generate_series(%(lo)s::int, %(hi)s::int) g,
       LATERAL (SELECT %(base)s::timestamptz + make_interval(secs => g) AS ts) t"""
_RUNS = """
INSERT INTO tether_runs (run_id, tenant_id, thread_id, assistant_id, graph_id, status, input,
                         last_seq, created_at, updated_at, started_at, ended_at, available_at)
SELECT 'br-' || g, '', 'bt-' || g, 'a', 'g', 'success',
       '{"messages": "' || repeat('m', 1000) || '"}', 5, ts, ts, ts, ts, ts
  FROM generate_series(%(lo)s::int, %(hi)s::int) g,
       LATERAL (SELECT %(base)s::timestamptz + make_interval(secs => g) AS ts) t"""
_EVENTS = """
INSERT INTO tether_run_events (run_id, seq, kind, data)
SELECT 'br-' || g, s, 'values', '{"e": "' || repeat('e', 200) || '"}'
  FROM generate_series(%(lo)s::int, %(hi)s::int) g, generate_series(1, 5) s"""
_CHECKPOINTS = """
INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,
                         checkpoint, metadata)
SELECT 'bt-' || g, '', lpad(c::text, 4, '0'),
       CASE WHEN c > 1 THEN lpad((c - 1)::text, 4, '0') END, NULL,
       jsonb_build_object('v', 4, 'id', lpad(c::text, 4, '0'), 'ts', '2026-01-01T00:00:00+00:00',
                          'channel_values', jsonb_build_object('note', repeat('c', 800)),
                          'channel_versions', jsonb_build_object('messages', c::text),
                          'versions_seen', '{}'::jsonb),
       jsonb_build_object('step', c)
  FROM generate_series(%(lo)s::int, %(hi)s::int) g, generate_series(1, 3) c"""
_BLOBS = """
INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
SELECT 'bt-' || g, '', 'messages', c::text, 'bytes', convert_to(repeat('b', 500), 'UTF8')
  FROM generate_series(%(lo)s::int, %(hi)s::int) g, generate_series(1, 3) c"""
_WRITES = """
INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,
                               type, blob, task_path)
SELECT 'bt-' || g, '', lpad(c::text, 4, '0'), 'task', w, 'messages', 'bytes',
       convert_to(repeat('w', 200), 'UTF8'), ''
  FROM generate_series(%(lo)s::int, %(hi)s::int) g, generate_series(1, 3) c,
       generate_series(0, 1) w"""
_STEPS = """
INSERT INTO tether_steps (thread_id, idx, value)
SELECT 'bt-' || g, s,
       '{"kind": "model", "name": "m", "usage": {"input_tokens": 900, "output_tokens": 120, '
       || '"total_tokens": 1020}, "cost_usd": 0.0021, "output": "' || repeat('o', 300) || '"}'
  FROM generate_series(%(lo)s::int, %(hi)s::int) g, generate_series(0, 3) s"""
_TOOLS = """
INSERT INTO tether_records (kind, key, thread_id, value, created_at)
SELECT 'tool', 'tool-' || g, 'bt-' || g,
       '{"state": "done", "tool": "refund", "args_hash": "' || md5(g::text)
       || '", "idempotency_key": "idem-' || g || '", "output": "' || repeat('t', 200) || '"}', 0
  FROM generate_series(%(lo)s::int, %(hi)s::int) g"""


async def _generate(url: str, count: int) -> float:
    """Create the schema, then ``count`` threads in chunks; the seconds it took."""
    import psycopg

    from tether.steps import append_step

    async with Runtime(url) as rt:
        saver = await rt.checkpointer()
        await append_step(saver, "setup", "model", name="m")  # the step log's tables
        await saver.adelete_thread("setup")
    started = time.perf_counter()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for lo in range(0, count, CHUNK):
            params = {"lo": lo, "hi": min(count, lo + CHUNK) - 1, "base": BASE}
            async with conn.transaction():
                for sql in (
                    _THREADS,
                    _RUNS,
                    _EVENTS,
                    _CHECKPOINTS,
                    _BLOBS,
                    _WRITES,
                    _STEPS,
                    _TOOLS,
                ):
                    await conn.execute(sql, params)
        await conn.execute("ANALYZE")
    return time.perf_counter() - started


def _rss_kb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


async def _stage(rt: Runtime, upto: int) -> tuple[Any, int]:
    """Sweep the threads older than ``upto``; the report and the peak RSS growth (kB)."""
    before = _rss_kb()
    peak = before
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_kb())
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample())
    now = BASE + timedelta(days=30, seconds=upto)
    try:
        report = await sweep(rt, POLICY, now=now)
    finally:
        done.set()
        await sampler
    return report, peak - before


def _probe(url: str, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--probe", url, "--seconds", str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )


async def _probe_main(url: str, seconds: float) -> None:
    """A worker's step, back to back on a live thread: a checkpoint, then a step record."""
    from langgraph.checkpoint.base import empty_checkpoint

    from tether.steps import append_step

    thread = f"live-{os.getpid()}"
    latencies: list[tuple[float, float]] = []
    async with Runtime(url) as rt:
        await rt.create_thread(thread_id=thread)
        saver = await rt.checkpointer()
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < end:
            i += 1
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"note": "x" * 800}
            checkpoint["channel_versions"] = {"note": i}
            at, started = time.time(), time.perf_counter()
            config = await saver.aput(config, checkpoint, {"step": i}, {"note": i})
            await append_step(saver, thread, "model", name="m", usage={"total_tokens": 10})
            latencies.append((at, (time.perf_counter() - started) * 1000))
    print(json.dumps(latencies))


def _latency(proc: subprocess.Popen[str], window: tuple[float, float] | None) -> list[float]:
    """The probe's step latencies (ms), only those that started inside ``window`` if given."""
    out, _ = proc.communicate(timeout=600)
    timed: list[list[float]] = json.loads(out)
    return [ms for at, ms in timed if window is None or window[0] <= at <= window[1]]


async def _bench(count: int) -> None:
    print(f"retention sweep on PostgreSQL: {count:,} threads ({machine()})")
    with postgres_databases(1) as (url,):
        seconds = await _generate(url, count)
        print(f"generated {count:,} threads in {seconds:.1f}s (24 rows each)")
        bounds = [round(count * sum(STAGES[: i + 1])) for i in range(len(STAGES))]
        probe_seconds = 10.0
        async with Runtime(url) as rt:
            done = 0
            for index, upto in enumerate(bounds):
                if index == len(bounds) - 1:
                    quiet = _latency(_probe(url, probe_seconds), None)
                    probe = _probe(url, probe_seconds + 5)
                    await asyncio.sleep(3)  # the probe's imports and connections
                started = time.time()
                report, grown_kb = await _stage(rt, upto)
                window = (started, time.time())
                rate = report.deleted / report.seconds if report.seconds else 0.0
                print(
                    f"stage {index + 1}: swept {report.deleted:,} threads (of {upto - done:,}) "
                    f"in {report.seconds:.1f}s = {rate:,.0f} threads/s; "
                    f"peak RSS +{grown_kb / 1024:.1f} MB"
                )
                assert report.deleted == upto - done, report
                assert report.failed == 0, report
                done = upto
                if rate:  # the last stage's expected length, for the latency probes
                    probe_seconds = min(30.0, max(3.0, count * STAGES[-1] / rate))
        during = _latency(probe, window)
    for name, values in (("no sweep", quiet), ("during the sweep", during)):
        print(
            f"worker step latency {name}: p50 {statistics.median(values):.2f} ms, "
            f"p95 {percentile(values, 95):.2f} ms ({len(values)} steps)"
        )
    ratio = statistics.median(during) / statistics.median(quiet)
    ratio95 = percentile(during, 95) / percentile(quiet, 95)
    print(f"step latency ratio = during / no sweep: p50 {ratio:.2f}x, p95 {ratio95:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="600 threads (a smoke test)")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=5.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        asyncio.run(_probe_main(args.probe, args.seconds))
        return
    asyncio.run(_bench(600 if args.quick else args.threads))


if __name__ == "__main__":
    main()
