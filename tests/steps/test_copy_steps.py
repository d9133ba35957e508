"""copy_steps: recorded steps copied into another thread, re-keyed, outputs replaceable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends import Backend
from tests.debug.refund import run_refund
from tether.steps import StepsError, copy_steps, copy_steps_sync, read_steps, read_steps_sync
from tether.store import store_for


async def test_copies_are_rekeyed_and_replaceable(backend: Backend, tmp_path: Path) -> None:
    async with backend.open() as saver:
        await run_refund(saver, tmp_path, "src")
        source = await read_steps(saver, "src")
        moved = await copy_steps(saver, "src", "dst", [0, 1], outputs={1: '{"order_id": "X"}'})
        copied = await read_steps(saver, "dst")
        assert moved == {0: copied[0].index, 1: copied[1].index}
        assert [s.kind for s in copied] == ["model", "tool"]
        assert copied[0].output == source[0].output
        assert copied[1].output == '{"order_id": "X"}'
        assert copied[1].detail == {"how": "run", "copied_from": ["src", 1], "replaced": True}
        assert copied[0].key == "dst|" + str(source[0].key).partition("|")[2]
        records = await store_for(saver).list("tool", thread_id="dst")
        assert [r.value["args_hash"] for r in records] == [source[1].input_hash]
        # The source is untouched.
        assert await read_steps(saver, "src") == source


async def test_replacing_a_step_that_is_not_copied_is_refused(
    backend: Backend, tmp_path: Path
) -> None:
    async with backend.open() as saver:
        await run_refund(saver, tmp_path, "src")
        with pytest.raises(StepsError, match=r"cannot replace steps \[5\]: they are not among"):
            await copy_steps(saver, "src", "dst", [0, 1], outputs={5: "x"})
        assert await read_steps(saver, "dst") == []


def test_the_sync_twin(tmp_path: Path) -> None:
    import asyncio

    from tether import open_checkpointer
    from tether.checkpointing import open_checkpointer_sync

    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def record() -> None:
        async with open_checkpointer(url) as saver:
            await run_refund(saver, tmp_path, "src")

    asyncio.run(record())
    with open_checkpointer_sync(url) as saver:
        assert copy_steps_sync(saver, "src", "dst", [2]) == {2: 0}
        assert [s.kind for s in read_steps_sync(saver, "dst")] == ["model"]
