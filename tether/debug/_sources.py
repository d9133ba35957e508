"""Where a timeline reads from: a local checkpointer, or a ``tether serve`` through the SDK.

Both give the same three things: the thread's checkpoints, its step log, and
the graph's shape (nodes and edges, for :meth:`Timeline.path`). A local source
runs the graph again (fork, replay, what-if) in this process, with the graph
it is given; a server does it with its own graph code, through its routes
(``/threads/{id}/fork``, ``/replay``, ``/what_if``) and runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from tether.checkpointing import open_checkpointer
from tether.debug._checkpoints import Checkpoint, Task, parse_time, tasks_from_json
from tether.debug._render import as_message
from tether.debug._replay import ReplayResult
from tether.debug.errors import DebugError
from tether.steps import Step, read_steps

__all__ = ["GraphSpec", "LocalSource", "RemoteSource", "Source", "open_source"]

GraphSpec = Pregel[Any, Any] | Callable[[BaseCheckpointSaver[Any]], Pregel[Any, Any]]
"""A compiled graph, or a function that compiles it on a given checkpointer."""

_ERROR, _INTERRUPT = "__error__", "__interrupt__"
_HISTORY_LIMIT = 10_000


class Source(Protocol):
    """What a timeline reads."""

    async def checkpoints(self, thread_id: str) -> list[Checkpoint]: ...

    async def steps(self, thread_id: str) -> list[Step]: ...

    async def shape(self, thread_id: str) -> dict[str, Any] | None: ...

    async def aclose(self) -> None: ...


def _bind(graph: GraphSpec | None, saver: BaseCheckpointSaver[Any]) -> Pregel[Any, Any] | None:
    """``graph`` running on ``saver``."""
    if graph is None:
        return None
    if isinstance(graph, Pregel):
        return graph if graph.checkpointer is saver else graph.copy({"checkpointer": saver})
    if callable(graph):
        return graph(saver)
    raise DebugError(
        f"graph must be a compiled graph or a function of the checkpointer, got {type(graph)}"
    )


class LocalSource:
    """A checkpointer in this process (and the graph, to run it again)."""

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        graph: GraphSpec | None = None,
        exits: AsyncExitStack | None = None,
    ) -> None:
        self.saver = saver
        self.graph = _bind(graph, saver)
        self._exits = exits

    def require_graph(self, what: str) -> Pregel[Any, Any]:
        if self.graph is None:
            raise DebugError(
                f"{what} runs the graph again: pass graph= (the compiled graph, or a function "
                "that compiles it on a checkpointer) to tether.debug.timeline"
            )
        return self.graph

    async def checkpoints(self, thread_id: str) -> list[Checkpoint]:
        if self.graph is not None:
            config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
            return [_from_snapshot(s) async for s in self.graph.aget_state_history(config)]
        found = self.saver.alist({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        return [_from_tuple(t) async for t in found]

    async def steps(self, thread_id: str) -> list[Step]:
        return await read_steps(self.saver, thread_id)

    async def shape(self, thread_id: str) -> dict[str, Any] | None:
        return None if self.graph is None else self.graph.get_graph().to_json()

    async def aclose(self) -> None:
        if self._exits is not None:
            await self._exits.aclose()


def _from_snapshot(snapshot: Any) -> Checkpoint:
    configurable = snapshot.config["configurable"]
    parent = (snapshot.parent_config or {}).get("configurable", {})
    metadata = snapshot.metadata or {}
    return Checkpoint(
        checkpoint_id=configurable["checkpoint_id"],
        parent_id=parent.get("checkpoint_id"),
        step=int(metadata.get("step", -1)),
        source=str(metadata.get("source", "")),
        created_at=parse_time(snapshot.created_at),
        values=dict(snapshot.values or {}),
        next=tuple(snapshot.next),
        tasks=tuple(
            Task(
                id=t.id,
                name=t.name,
                error=None if t.error is None else repr(t.error),
                interrupts=tuple(i.value for i in t.interrupts),
            )
            for t in snapshot.tasks
        ),
    )


def _from_tuple(found: Any) -> Checkpoint:
    checkpoint, metadata = found.checkpoint, found.metadata or {}
    tasks: dict[str, dict[str, Any]] = {}
    for task_id, channel, value in found.pending_writes or ():
        task = tasks.setdefault(task_id, {"error": None, "interrupts": []})
        if channel == _ERROR:
            task["error"] = repr(value)
        elif channel == _INTERRUPT:
            task["interrupts"].extend(getattr(i, "value", i) for i in value)
    values = {
        k: v for k, v in checkpoint["channel_values"].items() if not k.startswith(("__", "branch:"))
    }
    return Checkpoint(
        checkpoint_id=checkpoint["id"],
        parent_id=(found.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
        step=int(metadata.get("step", -1)),
        source=str(metadata.get("source", "")),
        created_at=parse_time(checkpoint.get("ts")),
        values=values,
        tasks=tuple(Task(i, "", t["error"], tuple(t["interrupts"])) for i, t in tasks.items()),
    )


class RemoteSource:
    """A thread on a ``tether serve``, read through LangGraph's official SDK."""

    def __init__(
        self, url: str, *, api_key: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        try:
            from langgraph_sdk import get_client
        except ImportError as exc:  # pragma: no cover - the server extra brings it
            raise DebugError(
                "reading a tether serve needs the langgraph SDK: pip install 'tether[server]'"
            ) from exc
        self.url = url
        self.client = get_client(url=url, api_key=api_key, headers=dict(headers or {}))

    async def checkpoints(self, thread_id: str) -> list[Checkpoint]:
        states = await self.client.threads.get_history(thread_id, limit=_HISTORY_LIMIT)
        return [_from_state_json(s) for s in states]

    async def steps(self, thread_id: str) -> list[Step]:
        found = await self.client.http.get(f"/threads/{thread_id}/steps")
        return [Step.from_json(doc) for doc in found["steps"]]

    async def assistant(self, thread_id: str) -> str | None:
        """The graph the thread ran: its newest run's assistant, else its metadata's graph."""
        runs = await self.client.runs.list(thread_id, limit=1)
        if runs:
            return str(runs[0]["assistant_id"])
        thread = await self.client.threads.get(thread_id)
        graph_id = (thread.get("metadata") or {}).get("graph_id")
        return None if not graph_id else str(graph_id)

    async def shape(self, thread_id: str) -> dict[str, Any] | None:
        assistant = await self.assistant(thread_id)
        if not assistant:
            return None
        drawn: dict[str, Any] = await self.client.assistants.get_graph(assistant)
        return drawn

    async def replay(self, thread_id: str, until: str | None) -> ReplayResult:
        """The server replays the thread with its own graph code (``POST /threads/{id}/replay``)."""
        body = {} if until is None else {"upto": until}
        found = await self.client.http.post(f"/threads/{thread_id}/replay", json=body)
        return ReplayResult.from_json(found)

    async def fork(
        self,
        thread_id: str,
        checkpoint_id: str,
        update: Mapping[str, Any] | None,
        *,
        as_node: str | None,
        thread_id_new: str | None = None,
    ) -> str:
        """The server forks the thread (``POST /threads/{id}/fork``); the new thread's id."""
        body: dict[str, Any] = {"checkpoint_id": checkpoint_id}
        for key, value in (("update", update), ("as_node", as_node), ("thread_id", thread_id_new)):
            if value is not None:
                body[key] = value
        found = await self.client.http.post(f"/threads/{thread_id}/fork", json=body)
        return str(found["thread_id"])

    async def what_if(
        self, thread_id: str, step: int, output: Any, *, thread_id_new: str | None = None
    ) -> str:
        """The server branches the thread with one output replaced and runs the branch
        (``POST /threads/{id}/what_if``); once that run stopped, the new thread's id."""
        body: dict[str, Any] = {"step": step, "output": output}
        if thread_id_new is not None:
            body["thread_id"] = thread_id_new
        found = await self.client.http.post(f"/threads/{thread_id}/what_if", json=body)
        new = str(found["thread"]["thread_id"])
        await self.client.runs.join(new, str(found["run"]["run_id"]))
        return new

    async def run(self, thread_id: str, input: Any, configurable: Mapping[str, Any]) -> None:
        """Run the thread on with the graph it ran (a run of the server's, waited for)."""
        assistant = await self.assistant(thread_id)
        if assistant is None:
            raise DebugError(
                f"thread {thread_id!r} names no graph on the server (no run, no graph_id)"
            )
        config = {"configurable": dict(configurable)} if configurable else None
        await self.client.runs.wait(thread_id, assistant, input=input, config=config)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        await self.client.aclose()


def _from_state_json(state: Mapping[str, Any]) -> Checkpoint:
    checkpoint = state.get("checkpoint") or {}
    parent = state.get("parent_checkpoint") or {}
    metadata = state.get("metadata") or {}
    return Checkpoint(
        checkpoint_id=str(checkpoint["checkpoint_id"]),
        parent_id=parent.get("checkpoint_id"),
        step=int(metadata.get("step", -1)),
        source=str(metadata.get("source", "")),
        created_at=parse_time(state.get("created_at")),
        values={k: _messages(v) for k, v in (state.get("values") or {}).items()},
        next=tuple(state.get("next") or ()),
        tasks=tasks_from_json(state.get("tasks") or ()),
    )


def _messages(value: Any) -> Any:
    """A channel's JSON value, a list of messages as messages (as a local read gives them)."""
    if not isinstance(value, list) or not value:
        return value
    messages = [as_message(v) for v in value]
    return messages if all(m is not None for m in messages) else value


def _is_server(source: str) -> bool:
    return source.startswith(("http://", "https://"))


async def open_source(
    source: str | BaseCheckpointSaver[Any],
    graph: GraphSpec | None,
    options: Mapping[str, Any],
) -> LocalSource | RemoteSource:
    """The source ``timeline`` reads: an open saver, a checkpointer URL, or a server URL."""
    if isinstance(source, BaseCheckpointSaver):
        return LocalSource(source, graph)
    if not isinstance(source, str):
        raise DebugError(
            "source must be a checkpointer URL, an open checkpointer, or a tether serve URL "
            f"(http:// or https://), got {type(source).__name__}"
        )
    if _is_server(source):
        return RemoteSource(source, **options)
    exits = AsyncExitStack()
    saver = await exits.enter_async_context(open_checkpointer(source, **options))
    return LocalSource(saver, graph, exits)
