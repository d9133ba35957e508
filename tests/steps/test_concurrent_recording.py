"""Two workers record the same model call: every caller sees the answer that was recorded.

Two workers run the same task when a lease expires under a live worker, or when
a run is resumed twice. Both find no record and call the model; the first
commit wins (put-if-absent) and the other worker's answer is dropped. What the
losing worker's node receives, streamed or not, must be the recorded answer:
otherwise its checkpoint holds an answer that a later replay never returns.

The interleaving is deterministic: the losing worker's model stops after its
first chunk until the winning worker has recorded its answer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langgraph.types import Command, interrupt

from tests.backends import Backend
from tests.steps.graphs import State, one_node
from tests.steps.scripted import CountingScriptedModel, count_calls, reply
from tether import open_checkpointer_sync
from tether.steps import read_steps, read_steps_sync, recorded

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
WINNER = "the winning worker answers first"
LOSER = "the losing worker answers too late"


class PausingModel(CountingScriptedModel):
    """Scripted (fake) chat model that calls ``pause()`` after its first chunk.

    Async calls run the sync methods in the executor, so ``pause`` blocks a
    worker thread there, never the event loop.
    """

    pause: Any = None

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        if self.pause is not None:
            self.pause()
        return super()._generate(*args, **kwargs)

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        for i, chunk in enumerate(super()._stream(*args, **kwargs)):
            yield chunk
            if i == 0 and self.pause is not None:
                self.pause()


class Race:
    """The two workers' models: the loser pauses until the winner has recorded its answer."""

    def __init__(self, tmp_path: Path) -> None:
        self.loser_paused, self.winner_recorded = threading.Event(), threading.Event()
        self.seen: list[str] = []  # what each node received, in the order they finished
        self.calls = {who: tmp_path / f"{who}.calls" for who in ("loser", "winner")}

    def _pause(self) -> None:
        self.loser_paused.set()
        assert self.winner_recorded.wait(60)

    def model(self, who: str) -> Any:
        text, pause = (LOSER, self._pause) if who == "loser" else (WINNER, None)
        inner = PausingModel(replies=[reply(text)], calls_file=str(self.calls[who]), pause=pause)
        return recorded(inner)

    def check(self, checkpointed: str, steps: list[Any]) -> None:
        # Both workers asked their model; one answer was recorded: the winner's.
        assert [count_calls(self.calls[who]) for who in ("loser", "winner")] == [1, 1]
        assert [s.output.content for s in steps if s.kind == "model"] == [WINNER]
        # The loser's node received the recorded answer, not its own model's.
        assert self.seen == [WINNER, WINNER]
        # The loser checkpointed last, and its state holds the recorded answer.
        assert checkpointed == WINNER


def _text(chunks: list[Any]) -> str:
    return "".join(str(c.content) for c in chunks)


def _node(api: str, model: Any, seen: list[str]) -> Callable[[State], Any]:
    """Pause for a go-ahead, then call the model; ``seen`` gets what the node received."""

    def node(state: State) -> dict[str, Any]:
        interrupt("go?")
        if api == "stream":
            text = _text(list(model.stream(state["messages"])))
        else:
            text = str(model.invoke(state["messages"]).content)
        seen.append(text)
        return {"messages": [AIMessage(text)]}

    async def anode(state: State) -> dict[str, Any]:
        interrupt("go?")
        if api == "astream":
            text = _text([c async for c in model.astream(state["messages"])])
        else:
            text = str((await model.ainvoke(state["messages"])).content)
        seen.append(text)
        return {"messages": [AIMessage(text)]}

    return anode if api.startswith("a") else node


async def _race_async(api: str, backend: Backend, race: Race) -> tuple[str, list[Any]]:
    """The loser plans, then pauses mid-call while the winner records; the loser commits last."""
    async with backend.open() as winner_saver, backend.open() as loser_saver:
        winner = one_node(_node(api, race.model("winner"), race.seen), winner_saver)
        loser = one_node(_node(api, race.model("loser"), race.seen), loser_saver)
        await winner.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)  # paused at "go?"
        losing = asyncio.create_task(loser.ainvoke(Command(resume="go"), CONFIG))
        assert await asyncio.to_thread(race.loser_paused.wait, 60)
        await winner.ainvoke(Command(resume="go"), CONFIG)
        race.winner_recorded.set()
        await losing
        state = await loser.aget_state(CONFIG)
        steps = await read_steps(winner_saver, "t1")
    return str(state.values["messages"][-1].content), steps


def _race_sync(api: str, backend: Backend, race: Race) -> tuple[str, list[Any]]:
    """:func:`_race_async` with sync nodes: the loser runs in a thread of its own."""
    errors: list[BaseException] = []
    with (
        open_checkpointer_sync(backend.url, **backend.options) as winner_saver,
        open_checkpointer_sync(backend.url, **backend.options) as loser_saver,
    ):
        winner = one_node(_node(api, race.model("winner"), race.seen), winner_saver)
        loser = one_node(_node(api, race.model("loser"), race.seen), loser_saver)
        winner.invoke({"messages": [HumanMessage("hi")]}, CONFIG)  # paused at "go?"

        def lose() -> None:
            try:
                loser.invoke(Command(resume="go"), CONFIG)
            except BaseException as exc:  # re-raised in the test's thread below
                errors.append(exc)

        losing = threading.Thread(target=lose)
        losing.start()
        assert race.loser_paused.wait(60)
        winner.invoke(Command(resume="go"), CONFIG)
        race.winner_recorded.set()
        losing.join(60)
        if errors:
            raise errors[0]
        state = loser.get_state(CONFIG)
        steps = read_steps_sync(winner_saver, "t1")
    return str(state.values["messages"][-1].content), steps


@pytest.mark.parametrize("api", ["ainvoke", "astream"])
async def test_a_losing_async_worker_sees_the_recorded_answer(
    api: str, durable_backend: Backend, tmp_path: Path
) -> None:
    race = Race(tmp_path)
    race.check(*await _race_async(api, durable_backend, race))


@pytest.mark.parametrize("api", ["invoke", "stream"])
def test_a_losing_sync_worker_sees_the_recorded_answer(
    api: str, durable_backend: Backend, tmp_path: Path
) -> None:
    race = Race(tmp_path)
    race.check(*_race_sync(api, durable_backend, race))
