"""A thread's run as one ordered view, and the ways back into it: state, diff, fork,
replay, what-if, path."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.debug._branch import branch, check_new_thread, new_thread_id, steps_before
from tether.debug._checkpoints import Checkpoint, lineage
from tether.debug._diff import StateDiff, diff_states
from tether.debug._entries import HEADERS, Entry, build_entries, root_task
from tether.debug._path import GraphPath, graph_path
from tether.debug._render import html_table, text_table
from tether.debug._replay import ReplayResult, replay_thread
from tether.debug._sources import GraphSpec, LocalSource, RemoteSource, open_source
from tether.debug.errors import DebugError, ReplayDivergenceError
from tether.steps import Step

__all__ = ["State", "Timeline", "timeline"]

At = int | str
"""A timeline step (its number) or a checkpoint id."""


@dataclass(frozen=True, repr=False)
class State:
    """The graph's state at one checkpoint.

    Attributes:
        checkpoint_id: The checkpoint.
        values: Its channels.
        next: The nodes due to run from it.
    """

    checkpoint_id: str
    values: Mapping[str, Any]
    next: tuple[str, ...] = field(default=())

    def __getitem__(self, channel: str) -> Any:
        return self.values[channel]

    def __repr__(self) -> str:
        return f"<State checkpoint={self.checkpoint_id} channels={sorted(self.values)}>"

    def _rows(self) -> list[tuple[str, str]]:
        from tether.debug._render import as_message, message_line, short

        rows: list[tuple[str, str]] = []
        for channel, value in self.values.items():
            messages = [as_message(v) for v in value] if isinstance(value, list) else []
            if messages and all(m is not None for m in messages):
                rows.extend((channel, message_line(m)) for m in messages if m is not None)
            else:
                rows.append((channel, short(value)))
        return rows

    def __str__(self) -> str:
        return text_table(("channel", f"checkpoint {self.checkpoint_id}"), self._rows())

    def _repr_html_(self) -> str:
        return html_table(
            ("channel", "value"), self._rows(), caption=f"checkpoint {self.checkpoint_id}"
        )


class Timeline:
    """One thread's run: checkpoints and step log joined (see :func:`timeline`).

    Attributes:
        thread_id: The thread.
        entries: The rows, in order.
        checkpoints: The thread's line of checkpoints, oldest first.
        steps: The thread's step log.
    """

    def __init__(
        self,
        source: LocalSource | RemoteSource,
        thread_id: str,
        line: list[Checkpoint],
        steps: list[Step],
    ) -> None:
        self.source = source
        self.thread_id = thread_id
        self.checkpoints = line
        self.steps = steps
        self.entries = build_entries(line, steps, thread_id)

    # -- reading -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, step: int) -> Entry:
        return self.entry(step)

    def entry(self, step: int) -> Entry:
        """The row numbered ``step``."""
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(self.entries):
            raise DebugError(
                f"step {_shown(step)} is not in this timeline (steps 0 to {len(self.entries) - 1})"
            )
        return self.entries[step]

    def find(
        self, kind: str | None = None, *, node: str | None = None, text: str | None = None
    ) -> list[Entry]:
        """The rows of a kind, a node, or whose summary holds ``text``."""
        return [
            e
            for e in self.entries
            if (kind is None or e.kind == kind)
            and (node is None or e.node == node)
            and (text is None or text in e.summary)
        ]

    def _checkpoint(self, checkpoint_id: str) -> Checkpoint:
        found = next((c for c in self.checkpoints if c.checkpoint_id == checkpoint_id), None)
        if found is None:
            raise DebugError(
                f"checkpoint {_shown(checkpoint_id)} is not on thread {self.thread_id!r}'s line"
            )
        return found

    def _after(self, checkpoint_id: str) -> Checkpoint:
        """The checkpoint written after ``checkpoint_id``'s tasks ran (itself, if none was)."""
        index = self.checkpoints.index(self._checkpoint(checkpoint_id))
        return (
            self.checkpoints[index + 1]
            if index + 1 < len(self.checkpoints)
            else self.checkpoints[index]
        )

    def _resolve(self, at: At) -> Checkpoint:
        """A step's resulting checkpoint, or the checkpoint named."""
        start = self._start(at)
        return start if isinstance(at, str) else self._after(start.checkpoint_id)

    def _start(self, at: At) -> Checkpoint:
        """Where a step's task started (for a fork), or the checkpoint named."""
        if isinstance(at, str):
            return self._checkpoint(at)
        entry = self.entry(at)
        if entry.checkpoint_id is None:
            raise DebugError(f"step {at} ({entry.kind}) has no checkpoint on this thread's line")
        return self._checkpoint(entry.checkpoint_id)

    def state(self, at: At | None = None) -> State:
        """The state after step ``at`` (or at checkpoint ``at``; default: the latest)."""
        if at is None:
            if not self.checkpoints:
                raise DebugError(f"thread {self.thread_id!r} has no checkpoints")
            checkpoint = self.checkpoints[-1]
        else:
            checkpoint = self._resolve(at)
        return State(checkpoint.checkpoint_id, checkpoint.values, checkpoint.next)

    def diff(self, a: At, b: At | None = None) -> StateDiff:
        """What changed from the state at ``a`` to the state at ``b`` (default: the latest)."""
        first, second = self.state(a), self.state(b)
        return diff_states(first.values, second.values, at_a=_name(a), at_b=_name(b))

    def path(self) -> GraphPath:
        """Not async: the graph's shape is read when the timeline is built."""
        return graph_path(self._shape, self.checkpoints)

    _shape: Mapping[str, Any] | None = None

    # -- rendering -----------------------------------------------------------------
    def __str__(self) -> str:
        return text_table(HEADERS, [e.row() for e in self.entries])

    def __repr__(self) -> str:
        counts = f"steps={len(self.entries)} checkpoints={len(self.checkpoints)}"
        return f"<Timeline thread={self.thread_id!r} {counts}>"

    def _repr_html_(self) -> str:
        caption = f"thread {self.thread_id}"
        return html_table(HEADERS, [e.row() for e in self.entries], caption=caption)

    def to_pandas(self) -> Any:
        """The rows as a pandas ``DataFrame`` (needs ``pip install 'tether[debug]'``)."""
        try:
            import pandas as pd  # type: ignore[import-untyped,unused-ignore]
        except ImportError as exc:
            raise DebugError(
                "Timeline.to_pandas needs pandas: pip install 'tether[debug]'"
            ) from exc
        columns = [
            "step",
            "node",
            "namespace",
            "time",
            "kind",
            "summary",
            "tokens",
            "cost_usd",
            "checkpoint_id",
            "task_id",
        ]
        return pd.DataFrame(
            [{c: getattr(e, c) for c in columns} for e in self.entries], columns=columns
        )

    # -- running again -------------------------------------------------------------
    def _local(self, what: str) -> LocalSource:
        if isinstance(self.source, LocalSource):
            return self.source
        raise DebugError(f"{what} runs on a local checkpointer; this timeline reads a tether serve")

    def _saver(self, what: str) -> BaseCheckpointSaver[Any]:
        return self._local(what).saver

    async def _open(self, thread_id: str) -> Timeline:
        return await _load(self._local("opening a thread"), thread_id)

    async def fork(
        self,
        at: At,
        update: Mapping[str, Any] | None = None,
        *,
        as_node: str | None = None,
        thread_id: str | None = None,
    ) -> Timeline:
        """A new thread that starts where step ``at`` started (or at checkpoint ``at``).

        The steps recorded before that point are copied with it, so running the
        fork replays them instead of asking the model again. Against a
        ``tether serve`` the server makes the fork (``POST /threads/{id}/fork``).

        Args:
            at: A timeline step (the fork starts before it) or a checkpoint id.
            update: State to write first, through LangGraph's ``update_state``.
            as_node: The node the update is written as.
            thread_id: The new thread's id (default: ``<thread>~fork-<random>``).

        Returns:
            The fork's timeline.
        """
        start = self._start(at)
        if isinstance(self.source, RemoteSource):
            target = await self.source.fork(
                self.thread_id,
                start.checkpoint_id,
                update,
                as_node=as_node,
                thread_id_new=thread_id,
            )
            return await _load(self.source, target)
        source = self._local("fork")
        line = self.checkpoints[: self.checkpoints.index(start) + 1]
        target = await self._new_thread(source.saver, thread_id, "fork")
        await branch(
            source.saver,
            self.thread_id,
            target,
            line,
            steps_before(line[:-1], self.steps, self.thread_id),
        )
        if update is not None or as_node is not None:
            graph = source.require_graph("fork with an update")
            await graph.aupdate_state(_head(target), update, as_node=as_node)
        return await self._open(target)

    async def replay(
        self, upto: At | None = None, *, check: bool = True, keep: bool = True
    ) -> ReplayResult:
        """Run the thread again from its start in scratch threads, from the log only.

        Every recorded model answer and tool result is replayed: the model is
        called zero times and no durable tool runs. Each replayed state is
        compared with the recorded one. Against a ``tether serve`` the server
        replays with its own graph code.

        Args:
            upto: The last step (or checkpoint) to replay; default: all.
            check: Raise :class:`ReplayDivergenceError` at the first diverging
                step (else it is reported in the result).
            keep: Keep the scratch thread of a super-step that diverged, to look at.
        """
        until = None if upto is None else self._start(upto).checkpoint_id
        if isinstance(self.source, RemoteSource):
            result = await self.source.replay(self.thread_id, until)
        else:
            graph = self.source.require_graph("replay")
            result = await replay_thread(
                graph,
                self.thread_id,
                self.checkpoints,
                self.steps,
                self.entries,
                until=until,
                keep_diverged=keep,
            )
        if check and result.divergence is not None:
            raise ReplayDivergenceError(result.divergence)
        return result

    async def what_if(self, step: int, output: Any, *, thread_id: str | None = None) -> Timeline:
        """The run with one recorded model output or tool result replaced.

        In a new thread: the steps before ``step`` are replayed (no model call),
        step ``step`` takes ``output``, and later steps run live: the model is
        asked and tools run, durable tools with new idempotency keys (they are
        derived from the thread). Against a ``tether serve`` the server makes the
        branch and runs it as a run (``POST /threads/{id}/what_if``), joined here.

        Args:
            step: A ``model`` or ``tool`` row of this timeline.
            output: The new value: a message (or text, for a model step), or
                the tool's result.
            thread_id: The new thread's id (default: ``<thread>~whatif-<random>``).

        Returns:
            The new thread's timeline, to compare with this one.
        """
        if isinstance(self.source, RemoteSource):
            self._replacement(step, output)
            target = await self.source.what_if(
                self.thread_id, step, output, thread_id_new=thread_id
            )
            return await _load(self.source, target)
        graph = self._local("what_if").require_graph("what_if")
        target = await self._what_if_branch(step, output, thread_id=thread_id)
        # The new thread's newest checkpoint is where step k started: resuming it in place
        # keeps its tasks' ids (naming a checkpoint would time-travel, under new task ids).
        await graph.ainvoke(None, _head(target))
        return await self._open(target)

    def _replaceable(self, step: int) -> Entry:
        """Step ``step``, if it is a recorded model or tool step (what what-if replaces)."""
        entry = self.entry(step)
        if entry.kind not in ("model", "tool") or entry.log_index is None:
            raise DebugError(
                f"step {step} is a {entry.kind!r} row, not a model or tool step: what_if "
                "replaces a recorded model output or tool result"
            )
        if entry.namespace:
            raise DebugError(
                f"step {step} ran in subgraph {entry.namespace!r}: what_if replaces steps of the "
                "root graph only (a subgraph's tasks get new ids when it runs again, so a "
                "replaced record in it would not be found); fork before it instead"
            )
        return entry

    def _replacement(self, step: int, output: Any) -> tuple[Entry, Any]:
        """Step ``step`` and its new output (a model's answer as a message)."""
        entry = self._replaceable(step)
        if entry.kind == "model" and isinstance(entry.output, BaseMessage):
            output = _as_message(output)
        return entry, output

    async def _new_thread(
        self, saver: BaseCheckpointSaver[Any], thread_id: str | None, what: str
    ) -> str:
        """A fresh ``<thread>~<what>-<random>``, or the caller's ``thread_id`` once checked."""
        if thread_id is None:
            return new_thread_id(self.thread_id, what)
        return await check_new_thread(saver, thread_id)

    async def _what_if_branch(self, step: int, output: Any, *, thread_id: str | None = None) -> str:
        """The new thread a what-if runs on, ready to run (not run yet); its id.

        A ``tether serve`` makes it this way, then runs it as a run of its own.
        """
        saver = self._saver("what_if")
        entry, output = self._replacement(step, output)
        assert entry.log_index is not None  # checked by _replaceable
        start = self._start(step)
        line = self.checkpoints[: self.checkpoints.index(start) + 1]
        before = set(steps_before(line[:-1], self.steps, self.thread_id))
        before |= {
            s.index
            for s in self.steps
            if root_task(s, self.thread_id) in start.task_ids and s.index < entry.log_index
        }
        target = await self._new_thread(saver, thread_id, "whatif")
        keep = before | {entry.log_index}
        await branch(saver, self.thread_id, target, line, keep, outputs={entry.log_index: output})
        return target

    def compare(
        self, other: Timeline, at: At | None = None, other_at: At | None = None
    ) -> StateDiff:
        """What differs from this thread's state to ``other``'s (e.g. a fork or a what-if).

        Args:
            other: Another timeline (the default positions are both latest states).
            at: A step or checkpoint of this timeline.
            other_at: A step or checkpoint of ``other``.
        """
        mine, theirs = self.state(at), other.state(other_at)
        return diff_states(
            mine.values,
            theirs.values,
            at_a=f"{self.thread_id} {_name(at)}",
            at_b=f"{other.thread_id} {_name(other_at)}",
        )

    async def run(self, input: Any = None, **config: Any) -> Timeline:
        """Run this thread on (a fork, or a thread waiting on an interrupt); its new timeline.

        Against a ``tether serve`` this is a run of the thread's graph, waited for.

        Args:
            input: The graph input, or ``None`` to continue from the newest checkpoint.
            **config: More ``configurable`` values for the run.
        """
        if isinstance(self.source, RemoteSource):
            await self.source.run(self.thread_id, input, config)
            return await self.refresh()
        graph = self._local("run").require_graph("run")
        head = _head(self.thread_id)
        head["configurable"].update(config)
        await graph.ainvoke(input, head)
        return await self.refresh()

    async def refresh(self) -> Timeline:
        """The same thread read again (after it ran on)."""
        return await _load(self.source, self.thread_id)

    async def aclose(self) -> None:
        """Close what :func:`timeline` opened (a checkpointer URL's connection, an SDK client)."""
        await self.source.aclose()

    async def __aenter__(self) -> Timeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _as_message(output: Any) -> BaseMessage:
    """A model step's new answer: a message, text (an AI message), or a message's JSON
    (with a ``type`` or a ``role``, as a server sends it)."""
    if isinstance(output, BaseMessage):
        return output
    if isinstance(output, str):
        return AIMessage(content=output)
    if isinstance(output, Mapping) and ("type" in output or "role" in output):
        try:
            (message,) = convert_to_messages([dict(output)])
        except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
            raise DebugError(f"a model step's new answer is not a message: {exc}") from exc
        return message
    raise DebugError(
        "a model step's new answer must be a message, text, or a message as JSON (with a "
        f"'type' or a 'role'), got {type(output).__name__}"
    )


def _shown(value: object, limit: int = 100) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error never echoes a megabyte back."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _head(thread_id: str) -> Any:
    """A config for a thread's newest checkpoint."""
    return {"configurable": {"thread_id": thread_id}}


def _name(at: At | None) -> str:
    if at is None:
        return "latest"
    return f"step {at}" if isinstance(at, int) else f"checkpoint {at}"


async def _load(source: LocalSource | RemoteSource, thread_id: str) -> Timeline:
    found = await source.checkpoints(thread_id)
    if not found:
        raise DebugError(f"thread {thread_id!r} has no checkpoints on this source")
    tl = Timeline(source, thread_id, lineage(found), await source.steps(thread_id))
    tl._shape = await source.shape(thread_id)
    return tl


async def timeline(
    source: str | BaseCheckpointSaver[Any],
    thread_id: str,
    graph: GraphSpec | None = None,
    **options: Any,
) -> Timeline:
    """A thread's run as a timeline: checkpoints and step log, joined.

    Args:
        source: A checkpointer URL (``sqlite:///...``, ``postgresql://...``,
            ``redis://...``), an open checkpointer, or the URL of a
            ``tether serve`` (``http://...``, read through LangGraph's SDK).
        thread_id: The thread.
        graph: The compiled graph, or a function that compiles it on a
            checkpointer: needed to fork with an update, replay, try a
            what-if, and to draw the path (a server draws its own).
        **options: For a checkpointer URL, ``open_checkpointer``'s options
            (encryption comes from ``TETHER_ENCRYPTION_KEYS`` unless given);
            for a server, ``api_key`` and ``headers``.

    Returns:
        The timeline; :meth:`Timeline.aclose` it when ``source`` was a URL.
    """
    if graph is not None and isinstance(source, str) and source.startswith(("http://", "https://")):
        raise DebugError("graph= is for a local checkpointer; a tether serve runs its own graphs")
    opened = await open_source(source, graph, options)
    try:
        return await _load(opened, str(thread_id))
    except BaseException:
        await opened.aclose()
        raise
