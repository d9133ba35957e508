"""``tether retention run`` and ``tether erase --user|--tenant`` pointed at a database without a
run store (one only a checkpointer wrote, or none at all) say so instead of sweeping nothing,
and leave it as it was."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from tests.backends import Backend, fresh_backend
from tests.runtime.store.raw import rows
from tether.cli import main

RUN = ["retention", "run", "--now", "2026-11-30T12:00:00+00:00"]
POLICY = json.dumps({"retention": {"rules": [{"status": "success", "max_age": "1d"}]}})


def _tables(url: str) -> set[str]:
    if url.startswith("sqlite"):
        return {t for (t,) in rows(url, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {t for (t,) in rows(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


@pytest.fixture(params=["sqlite", "postgres"])
def checkpoint_only(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A database holding one thread's checkpoint, written by a checkpointer alone."""
    servers = request.getfixturevalue("servers") if request.param == "postgres" else {}
    with fresh_backend(request.param, servers, tmp_path) as backend:

        async def write() -> None:
            async with backend.open() as saver:
                config: Any = {"configurable": {"thread_id": "lib-1", "checkpoint_ns": ""}}
                await saver.aput(config, empty_checkpoint(), {"source": "input"}, {})

        asyncio.run(write())
        (tmp_path / "tether.json").write_text(POLICY)
        yield backend


def test_a_checkpoint_only_database_is_refused_by_name(
    checkpoint_only: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = checkpoint_only.url
    before = _tables(url)
    assert "checkpoints" in before
    policy = ["--policy", str(tmp_path / "tether.json")]
    assert main([*RUN, "--url", url, *policy]) == 2
    err = capsys.readouterr().err
    assert "holds LangGraph checkpoints but no tether run store (no tether_threads table)" in err
    assert "retention finds threads through the run store" in err
    assert main(["erase", "--url", url, "--user", "ann"]) == 2
    assert "erasing a tenant or a user finds threads through the run store" in (
        capsys.readouterr().err
    )
    assert _tables(url) == before  # no empty run store was created in it

    # a thread id is erased where only a checkpointer kept it
    assert main(["erase", "--url", url, "--thread", "lib-1"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["threads"] == 0
    assert rows(url, "SELECT thread_id FROM checkpoints") == []


def test_a_missing_database_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tether.json").write_text(POLICY)
    url = f"sqlite:///{tmp_path / 'nothing.db'}"
    assert main([*RUN, "--url", url, "--policy", str(tmp_path / "tether.json")]) == 2
    assert "holds no tether run store (no tether_threads table), so retention would find" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "nothing.db").exists()
