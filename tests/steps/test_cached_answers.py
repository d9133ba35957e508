"""A recorded call asks nothing of the store's loop for what this process already knows.

In a sync node every ``Await`` is a hop to the record store's event loop and
back; the record keys of a loaded thread and pins already checked are answered
from memory, as flow steps that yield no operation at all.
"""

from __future__ import annotations

import uuid
from typing import Any

from tether import open_checkpointer
from tether.steps._io import Await
from tether.steps._known import known, known_flow, remember
from tether.steps._scope import PINS_KEY, NodeScope
from tether.steps._versions import VersionPins, ensure_pins, ensure_pins_flow
from tether.store import store_for


def _operations(flow: Any) -> tuple[list[Any], Any]:
    """Drive ``flow`` by hand: what it yields (each answered ``False``), and its answer."""
    yielded: list[Any] = []
    try:
        op = next(flow)
        while True:
            yielded.append(op)
            op = flow.send(False)
    except StopIteration as done:
        return yielded, done.value


async def test_known_keys_of_a_loaded_thread_are_answered_without_an_operation() -> None:
    async with open_checkpointer("memory://") as saver:
        store, thread = store_for(saver), f"t-{uuid.uuid4().hex}"
        ops, _ = _operations(known_flow(store, thread, "model", "k"))
        assert [type(op) for op in ops] == [Await]  # not loaded yet: one read
        assert await known(store, thread, "model", "k") is False  # loads the thread
        remember(store, thread, "model", "k")
        assert _operations(known_flow(store, thread, "model", "k")) == ([], True)
        assert _operations(known_flow(store, thread, "tool", "k")) == ([], False)


def _scope(saver: Any, thread: str, pins: VersionPins) -> NodeScope:
    config: Any = {"configurable": {PINS_KEY: pins}}
    return NodeScope(config, saver, store_for(saver), thread, "", "task", "node", 1, None)  # type: ignore[arg-type]


async def test_pins_checked_once_are_answered_without_an_operation() -> None:
    async with open_checkpointer("memory://") as saver:
        pins = VersionPins("pinned", "g1", model_id="m")
        scope = _scope(saver, f"t-{uuid.uuid4().hex}", pins)
        ops, _ = _operations(ensure_pins_flow(scope))
        assert [type(op) for op in ops] == [Await]  # not checked yet
        assert await ensure_pins(scope) is pins
        assert _operations(ensure_pins_flow(scope)) == ([], pins)
        other = _scope(saver, scope.thread_id, VersionPins("pinned", "g2", model_id="m"))
        assert [type(op) for op in _operations(ensure_pins_flow(other))[0]] == [Await]
