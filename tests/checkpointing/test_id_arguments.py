"""A bare string where a saver takes a collection of ids is refused the same on every backend.

``delete_for_runs("abc")`` or ``prune("abc")`` would otherwise act on the ids
``a``, ``b`` and ``c`` (and ``b"abc"`` on ``97``, ``98`` and ``99``): silent
data loss. Each backend, with or without the encryption layer, sync or async,
refuses it before anything is deleted, with the same error naming the argument.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring
from tether.checkpointing._cascade import check_ids
from tether.errors import TetherError

Saver = BaseCheckpointSaver[Any]

# Each id is a thread holding one checkpoint of the run of the same id.
_IDS = ("a", "b", "c", "97", "98", "99", "abc")


async def _seed(saver: Saver) -> None:
    for id_ in _IDS:
        config = {"configurable": {"thread_id": id_, "checkpoint_ns": ""}}
        metadata: Any = {"source": "input", "step": -1, "parents": {}, "run_id": id_}
        await saver.aput(config, empty_checkpoint(), metadata, {})


async def _surviving(saver: Saver) -> list[str]:
    return [
        id_
        for id_ in _IDS
        if await saver.aget_tuple({"configurable": {"thread_id": id_}}) is not None
    ]


def _calls(saver: Saver, bad: Any) -> dict[str, Callable[[], Any]]:
    """Each public collection-taking method, called with ``bad``, as a coroutine factory."""
    return {
        "adelete_for_runs": lambda: saver.adelete_for_runs(bad),
        "delete_for_runs": lambda: asyncio.to_thread(saver.delete_for_runs, bad),
        "aprune": lambda: saver.aprune(bad),
        "aprune delete": lambda: saver.aprune(bad, strategy="delete"),
        "prune": lambda: asyncio.to_thread(saver.prune, bad),
    }


_ARGUMENT = {"delete_for_runs": "run_ids", "prune": "thread_ids"}


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
@pytest.mark.parametrize("bad", ["abc", b"abc"], ids=["str", "bytes"])
async def test_a_bare_string_is_refused_before_anything_is_deleted(
    backend: Backend, bad: Any, encrypted: bool
) -> None:
    options = {"encryption": ring("k1")} if encrypted else {"encryption": False}
    async with backend.open(**options) as saver:
        await _seed(saver)
        for name, call in _calls(saver, bad).items():
            method = name.split()[0].removeprefix("a")
            with pytest.raises(TypeError) as caught:
                await call()
            message = str(caught.value)
            assert isinstance(caught.value, TetherError), name
            assert f"{method}() argument {_ARGUMENT[method]}" in message, (name, message)
            assert f"not a single string ({bad!r}); pass [{bad!r}]" in message
            assert await _surviving(saver) == list(_IDS), name


async def test_what_is_not_a_collection_is_refused(backend: Backend) -> None:
    async with backend.open() as saver:
        await _seed(saver)
        for bad, kind in ((7, "int"), (None, "NoneType")):
            for name, call in _calls(saver, bad).items():
                with pytest.raises(TypeError, match=rf"a collection of .* ids, not {kind}$"):
                    await call()
                assert await _surviving(saver) == list(_IDS), name


async def test_any_collection_of_ids_is_taken(backend: Backend) -> None:
    async with backend.open() as saver:
        await _seed(saver)
        await saver.adelete_for_runs(("a",))
        await saver.adelete_for_runs({"b"})
        await saver.aprune(iter(["c"]), strategy="delete")
        await saver.aprune(["97"])
        assert await _surviving(saver) == ["97", "98", "99", "abc"]


def test_the_check_names_the_caller_and_argument() -> None:
    assert check_ids(["x", 1], argument="thread_ids", caller="prune") == ["x", "1"]
    with pytest.raises(TypeError, match=r"^prune\(\) argument thread_ids takes"):
        check_ids("x", argument="thread_ids", caller="prune")
