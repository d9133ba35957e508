"""Records and steps carry the run that wrote them; older tables gain the column."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from tests.backends import Backend
from tether import open_checkpointer
from tether.store import store_for


class _State(TypedDict):
    n: int


def _recording_graph(saver: Any) -> Any:
    store = store_for(saver)

    async def node(state: _State) -> dict[str, Any]:
        await store.insert("model", f"k{state['n']}", {"n": state["n"]}, thread_id="t")
        await store.append_step("t", {"n": state["n"]})
        return {"n": state["n"] + 1}

    builder = StateGraph(_State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize(
    "config",
    [
        {"metadata": {"run_id": "run-m"}},
        {"configurable": {"run_id": "run-m"}},
        {"metadata": {"run_id": "run-m"}, "configurable": {"run_id": "other"}},
    ],
    ids=["metadata", "configurable", "metadata-first"],
)
async def test_a_node_stamps_its_run_as_the_checkpoints_do(
    backend: Backend, config: dict[str, Any]
) -> None:
    async with backend.open() as saver:
        graph = _recording_graph(saver)
        full = {**config, "configurable": {**config.get("configurable", {}), "thread_id": "t"}}
        await graph.ainvoke({"n": 0}, full)
        checkpoint = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
        assert checkpoint is not None
        assert checkpoint.metadata.get("run_id") == "run-m"
        record = await store_for(saver).get("model", "k0")
        assert record is not None
        assert record.run_id == "run-m"
        await store_for(saver).insert("model", "outside", {}, thread_id="t")
        outside = await store_for(saver).get("model", "outside")
        assert outside is not None
        assert outside.run_id is None

        await store_for(saver).delete_runs(["run-m"])

        assert await store_for(saver).get("model", "k0") is None
        assert await store_for(saver).steps("t") == []
        assert await store_for(saver).get("model", "outside") is not None


_OLD_SQLITE = """
CREATE TABLE tether_records (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL,
    thread_id TEXT NOT NULL, value TEXT NOT NULL, created_at REAL NOT NULL, UNIQUE (kind, key));
CREATE TABLE tether_steps (thread_id TEXT NOT NULL, idx INTEGER NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (thread_id, idx));
INSERT INTO tether_records (kind, key, thread_id, value, created_at)
    VALUES ('model', 'old', 't', '{"v":1}', 1.0);
INSERT INTO tether_steps VALUES ('t', 0, '{"s":0}');
"""


async def test_sqlite_tables_of_older_versions_gain_the_run_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(_OLD_SQLITE)
    async with open_checkpointer(f"sqlite:///{path}") as saver:
        await _old_rows_read_and_new_rows_deletable(saver)


async def test_postgres_tables_of_older_versions_gain_the_run_column(
    servers: dict[str, str],
) -> None:
    import psycopg

    from tests.backends import fresh_postgres_database

    with fresh_postgres_database(servers["postgres"]) as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            sql = _OLD_SQLITE.replace("INTEGER PRIMARY KEY", "BIGSERIAL")
            sql = sql.replace("REAL", "DOUBLE PRECISION").replace(", UNIQUE", ", PRIMARY KEY")
            for statement in filter(str.strip, sql.split(";")):
                await conn.execute(statement)
        async with open_checkpointer(url) as saver:
            await _old_rows_read_and_new_rows_deletable(saver)


async def _old_rows_read_and_new_rows_deletable(saver: Any) -> None:
    store = store_for(saver)
    old = await store.get("model", "old")
    assert old is not None
    assert (old.value, old.run_id) == ({"v": 1}, None)
    await store.insert("model", "new", {"v": 2}, thread_id="t", run_id="r1")
    await store.append_step("t", {"s": 1}, run_id="r1")
    await store.delete_runs(["r1"])
    assert await store.get("model", "new") is None
    assert await store.steps("t") == [{"s": 0}]
    await store.delete_thread("t")
    assert await store.get("model", "old") is None


async def test_sqlite_claims_commit_fully_synced(tmp_path: Path) -> None:
    """Put-if-absent (a tool's claim before its effect) keeps synchronous=FULL; results relax."""
    async with open_checkpointer(f"sqlite:///{tmp_path / 'c.db'}") as saver:
        store = store_for(saver)
        await store.insert("tool", "warm-up", {}, thread_id="t")  # creates the tables
        statements: list[str] = []
        # aiosqlite's connection thread is the only one that may touch the sqlite3 object.
        trace = saver.conn._conn.set_trace_callback  # type: ignore[attr-defined]
        await saver.conn._execute(trace, statements.append)  # type: ignore[attr-defined]
        try:
            await store.insert("tool", "claim", {"state": "claimed"}, thread_id="t")
            claim = list(statements)
            statements.clear()
            await store.put_with_step("tool", "result", {}, thread_id="t", step={"k": 1})
            result = list(statements)
        finally:
            await saver.conn._execute(trace, None)  # type: ignore[attr-defined]
    assert any(s.startswith("INSERT INTO tether_records") for s in claim)
    assert not any("synchronous" in s for s in claim)
    assert "PRAGMA synchronous = NORMAL" in result
