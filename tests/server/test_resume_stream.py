"""Streams survive the server: runs executed by ``tether worker`` processes, the SDK's own
reconnect with ``Last-Event-ID`` after ``tether serve`` crashes mid-stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph_sdk import get_client

from tests.runtime.workers import Workers
from tests.server.conftest import PROJECT, ServeProcess
from tether.runtime import Runtime

TICKS = 30


async def test_sdk_reconnects_after_a_server_crash_and_misses_nothing(
    store_url: str, tmp_path: Path
) -> None:
    workers = Workers(store_url, tmp_path, project=PROJECT)
    server = ServeProcess(store_url, tmp_path, ("--workers", "0"))
    try:
        server.start()
        workers.start(1)
        client = get_client(url=server.base)
        thread = await client.threads.create()
        parts: list[Any] = []
        stream = client.runs.stream(
            thread["thread_id"],
            "ticker",
            input={"until": TICKS},
            config={"recursion_limit": 1000},
            stream_mode="values",
        )
        async for part in stream:
            parts.append(part)
            if part.event == "values" and part.data.get("n") == 3 and server.starts == 1:
                server.kill()  # every open connection is cut mid-stream
                server.start()  # same port: the SDK reconnects to Location
        values = [p.data.get("n") for p in parts if p.event == "values"]
        assert values == [None, *range(1, TICKS + 1)]  # each tick once, in order
        assert [p.event for p in parts].count("metadata") == 1
        assert parts[-1].event == "end"
        assert parts[-1].data["status"] == "success"
        assert server.starts == 2
    finally:
        server.stop()
        workers.stop_all()


async def test_on_disconnect_cancel_stops_the_run(store_url: str, tmp_path: Path) -> None:
    server = ServeProcess(store_url, tmp_path)
    try:
        client = get_client(url=server.start())
        thread = await client.threads.create()
        tid = thread["thread_id"]
        run_id = None
        stream = client.runs.stream(
            tid,
            "ticker",
            input={"until": 100000},
            config={"recursion_limit": 200000},
            on_disconnect="cancel",
        )
        async for part in stream:
            if part.event == "metadata":
                run_id = part.data["run_id"]
            if part.event == "values" and part.data.get("n"):
                break
        await stream.aclose()  # type: ignore[attr-defined]
        assert run_id is not None
        ticks = await client.runs.join(tid, run_id)
        assert ticks["n"] < 100000
        run = await client.runs.get(tid, run_id)
        assert run["status"] == "interrupted"
        assert "disconnected" in run["cancel_reason"]
    finally:
        server.stop()


async def test_without_a_url_the_store_is_sqlite_next_to_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("langgraph.json", "agents.py", "webapp.py"):
        (project / name).write_text((PROJECT.parent / name).read_text())
    server = ServeProcess(None, tmp_path, project=project / "langgraph.json")
    try:
        client = get_client(url=server.start())
        out = await client.runs.wait(None, "echo", input={"text": "embedded"})
        assert out == {"text": "embedded", "trace": ["a", "b", "c"]}
        assert (project / ".tether" / "serve.db").exists()
    finally:
        server.stop()


async def test_sigterm_hands_runs_back_and_the_next_server_finishes_them(
    store_url: str, tmp_path: Path
) -> None:
    server = ServeProcess(store_url, tmp_path, ("--shutdown-grace", "10"))
    try:
        client = get_client(url=server.start())
        thread = await client.threads.create()
        tid = thread["thread_id"]
        parts: list[Any] = []
        stream = client.runs.stream(
            tid, "ticker", input={"until": TICKS}, config={"recursion_limit": 1000}
        )
        async for part in stream:
            parts.append(part)
            if part.event == "values" and part.data.get("n") == 3 and server.starts == 1:
                server.stop()  # SIGTERM: streams closed, the run handed back at a step
                server.start()  # its worker claims the run again; the SDK reconnects
        ticks = [p.data.get("n") for p in parts if p.event == "values"]
        assert [n for n in ticks if n is not None][-1] == TICKS
        assert sorted(set(ticks) - {None}) == list(range(1, TICKS + 1))
        assert ticks == sorted(ticks, key=lambda n: n or 0)
        ids = [int(p.id) for p in parts if p.event != "end"]
        assert ids == sorted(set(ids))  # nothing replayed twice
        assert parts[-1].data["status"] == "success"
        run_id = parts[0].data["run_id"]
        assert (await client.runs.get(tid, run_id))["status"] == "success"
        async with Runtime(store_url) as runtime:
            kinds = [e.kind for e in await runtime.events(run_id)]
        assert kinds.count("run.released") == 1  # handed back, not taken over after a crash
        assert kinds.count("run.started") == 2
    finally:
        server.stop()
