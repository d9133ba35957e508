"""Encryption overhead: ms per checkpoint, encrypted vs unencrypted, on every backend.

Each sample saves a chain of checkpoints the way a chat agent's loop does: a
``messages`` channel of a few KB (ten human/AI/tool messages), a ``note`` str
channel, and two pending writes per step, all new versions. The encrypted and
plain savers run alternately on the same backend, several rounds each, and the
table shows the best round's ms per checkpoint and the ratio (goal: <= 1.15x).

``--mode graph`` runs a small scripted agent graph instead (LangGraph passes every
channel at every step, most of them unchanged).

Run: ``.venv/bin/python bench/encryption_overhead.py [--mode aput|graph] [--steps 200]
[--rounds 9] [--backends memory,sqlite,postgres,redis]``.
Uses TETHER_TEST_POSTGRES_URL / TETHER_TEST_REDIS_URL when set, otherwise starts
throwaway servers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _servers import bench_servers
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from tether import open_checkpointer
from tether.checkpointing.encryption import KeyRing

GOAL = 1.15
BACKENDS = ("memory", "sqlite", "postgres", "redis")


def _messages() -> list[Any]:
    text = "The customer asks about order 1234 and the refund policy for damaged goods. " * 4
    out: list[Any] = []
    for i in range(3):
        out.append(HumanMessage(content=f"{i}: {text}"))
        call = {"id": f"call-{i}", "name": "lookup", "args": {"order": 1234 + i}}
        out.append(AIMessage(content=text, tool_calls=[call]))
        out.append(ToolMessage(content=f"record {i}: {text}", tool_call_id=f"call-{i}"))
    out.append(AIMessage(content=text))
    return out


async def _sample(url: str, options: dict[str, Any], steps: int) -> float:
    """Mean ms per checkpoint (aput + aput_writes) over ``steps`` steps on a fresh thread."""
    messages = _messages()
    async with open_checkpointer(url, **options) as saver:
        config: Any = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
        versions: dict[str, Any] = {}
        checkpoint = empty_checkpoint()
        start = time.perf_counter()
        for step in range(steps):
            checkpoint = empty_checkpoint()
            for ch in ("messages", "note"):
                versions[ch] = saver.get_next_version(versions.get(ch), None)
            checkpoint["channel_values"] = {"messages": messages, "note": f"step {step}"}
            checkpoint["channel_versions"] = dict(versions)
            metadata: Any = {"source": "loop", "step": step, "parents": {}}
            config = await saver.aput(config, checkpoint, metadata, dict(versions))
            await saver.aput_writes(
                config, [("messages", messages[-1:]), ("note", "next")], f"task-{step}"
            )
        return (time.perf_counter() - start) * 1000 / steps


class _State(TypedDict):
    note: str
    messages: Annotated[list[AnyMessage], add_messages]


def _graph(saver: Any) -> Any:
    """A scripted three-node agent: model turn, tool result, final answer (no model calls)."""
    text = _messages()[-1].content

    def agent(state: _State) -> dict[str, Any]:
        call = {"id": "call-9", "name": "lookup", "args": {"order": 99}}
        return {"note": "looking up", "messages": [AIMessage(content=text, tool_calls=[call])]}

    def tool(state: _State) -> dict[str, Any]:
        return {"messages": [ToolMessage(content=f"record: {text}", tool_call_id="call-9")]}

    def answer(state: _State) -> dict[str, Any]:
        return {"messages": [AIMessage(content=text)]}

    graph = StateGraph(_State)
    for name, fn in (("agent", agent), ("tool", tool), ("answer", answer)):
        graph.add_node(name, fn)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "tool")
    graph.add_edge("tool", "answer")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=saver)


async def _sample_graph(url: str, options: dict[str, Any], steps: int) -> float:
    """Mean ms per checkpoint over ``steps`` graph runs (each its own thread)."""
    async with open_checkpointer(url, **options) as saver:
        graph = _graph(saver)
        history = _messages()
        start = time.perf_counter()
        for _ in range(steps):
            config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
            await graph.ainvoke({"note": "", "messages": history}, config)
        elapsed = time.perf_counter() - start
        written = len([t async for t in saver.alist(config)])  # checkpoints per run
        return elapsed * 1000 / (steps * written)


Side = tuple[str, dict[str, Any]]  # one saver's URL and options


async def _backend(name: str, sides: tuple[Side, Side], args: Any) -> tuple[float, float]:
    """Best ms per checkpoint of the plain and the encrypted saver, each on its own store.

    A store that holds ciphertext is never opened without a key, so the two
    savers cannot share a database or key prefix.
    """
    ring = KeyRing([("bench", os.urandom(32))])
    plain: list[float] = []
    encrypted: list[float] = []
    sample = _sample_graph if args.mode == "graph" else _sample
    steps = max(1, args.steps // 4) if args.mode == "graph" else args.steps
    runs = [(plain, False, sides[0]), (encrypted, ring, sides[1])]
    for _, encryption, (url, extra) in runs:  # warm both savers up (imports, caches, connections)
        await sample(url.replace("{sample}", "warmup"), {**extra, "encryption": encryption}, 5)
    for round_ in range(args.rounds):
        # Alternate which saver goes first, and give SQLite a fresh file per sample,
        # so neither side always runs on the larger store.
        for results, encryption, (url, extra) in runs if round_ % 2 == 0 else runs[::-1]:
            target = url.replace("{sample}", uuid.uuid4().hex[:8])
            results.append(await sample(target, {**extra, "encryption": encryption}, steps))
    # Best of the rounds: other processes only ever add time, so the minimum is
    # the least disturbed measurement of each saver (as timeit does).
    return min(plain), min(encrypted)


def _postgres_database(server_url: str, label: str) -> str:
    """A fresh database on the server (left for the throwaway server to discard)."""
    import psycopg

    name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server_url.rpartition('/')[0]}/{name}"


async def _main(args: Any) -> int:
    with bench_servers() as urls, tempfile.TemporaryDirectory() as tmp:
        sqlite = f"sqlite:///{tmp}/bench-{{sample}}.db"
        postgres: list[Side] = [
            (_postgres_database(urls["postgres"], side), {})
            for side in ("plain", "enc")
            if "postgres" in args.backends
        ]
        redis = [(urls["redis"], {"key_prefix": f"bench{uuid.uuid4().hex[:8]}"}) for _ in "pe"]
        targets: list[tuple[str, tuple[Side, Side]]] = [
            ("memory", (("memory://", {}), ("memory://", {}))),
            ("sqlite", ((sqlite, {}), (sqlite, {}))),
            ("postgres", (postgres[0], postgres[1]) if postgres else (("", {}), ("", {}))),
            ("redis", (redis[0], redis[1])),
        ]
        what = "3-node graph runs" if args.mode == "graph" else "aput + 2 writes"
        print(
            f"ms per checkpoint ({what}, ~{_payload_kb():.1f} KB of messages), "
            f"best of {args.rounds} alternating rounds"
        )
        print(f"{'backend':<10}{'plain ms':>10}{'encrypted ms':>14}{'ratio':>8}  goal <= {GOAL}x")
        worst = 0.0
        for name, sides in targets:
            if name not in args.backends:
                continue
            plain, enc = await _backend(name, sides, args)
            ratio = enc / plain
            worst = max(worst, ratio)
            flag = "" if ratio <= GOAL else "  over goal"
            print(f"{name:<10}{plain:>10.3f}{enc:>14.3f}{ratio:>7.2f}x{flag}")
        print(f"worst ratio {worst:.2f}x")
    return 0


def _payload_kb() -> float:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return len(JsonPlusSerializer().dumps_typed(_messages())[1]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="checkpoints per sample")
    parser.add_argument(
        "--mode",
        choices=("aput", "graph"),
        default="aput",
        help="direct aput of a checkpoint, or runs of a small scripted graph",
    )
    parser.add_argument("--rounds", type=int, default=9, help="samples per saver")
    parser.add_argument(
        "--backends",
        type=lambda text: [name.strip() for name in text.split(",")],
        default=list(BACKENDS),
        help=f"comma-separated subset of {','.join(BACKENDS)}",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backend(s) {', '.join(unknown)}; choose from {', '.join(BACKENDS)}")
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
