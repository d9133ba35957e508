"""The step layer's interpreters: an unknown operation is an error, in sync and async code."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from tether import open_checkpointer
from tether.steps import _io
from tether.store import store_for


def _flow() -> Generator[Any, Any, Any]:
    return (yield "not an operation")


async def test_an_unknown_operation_is_refused_by_both_interpreters() -> None:
    async with open_checkpointer("memory://") as saver:
        store = store_for(saver)
        with pytest.raises(TypeError, match="'not an operation' is not an operation of the step"):
            await _io.run(_flow(), store)
        with pytest.raises(TypeError, match="'not an operation' is not an operation of the step"):
            await asyncio.to_thread(_io.run_sync, _flow(), store)
