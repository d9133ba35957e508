"""The timeline without ``await``: :func:`timeline_sync` and :class:`SyncTimeline`.

A :class:`SyncTimeline` runs its :class:`Timeline` on an event loop of its own,
in a background thread, and waits for each call. So it works where nothing is
awaited (a script, a debugger prompt) and in a notebook cell too: the
notebook's event loop is already running in the main thread, so
``asyncio.run`` cannot be used there, but a loop in another thread can. The
source is opened on that loop, so it is given as a URL (a checkpointer's, or
a ``tether serve``'s), not as a checkpointer already open on another loop.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether._loops import LoopThread
from tether.debug._diff import StateDiff
from tether.debug._entries import Entry
from tether.debug._path import GraphPath
from tether.debug._replay import ReplayResult
from tether.debug._sources import GraphSpec
from tether.debug._timeline import At, State, Timeline, timeline
from tether.debug.errors import DebugError

__all__ = ["SyncTimeline", "timeline_sync"]

T = TypeVar("T")


class _Runner:
    """The background loop the timelines of one :func:`timeline_sync` share."""

    def __init__(self) -> None:
        self._thread: LoopThread | None = LoopThread("tether-debug")

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._thread is None:
            coro.close()
            raise DebugError("this timeline was closed; open it again with timeline_sync")
        return self._thread.call(coro)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.close()
            self._thread = None


class SyncTimeline:
    """A :class:`Timeline` whose calls block instead of being awaited (see :func:`timeline_sync`).

    The reading calls are the timeline's own; ``fork``, ``replay``, ``what_if``,
    ``run`` and ``refresh`` wait for the result. The timelines a fork or a
    what-if returns share this one's connection: close the first one (or use
    ``with``) when done, and the others with it.

    Attributes:
        timeline: The async timeline underneath.
    """

    def __init__(self, found: Timeline, runner: _Runner) -> None:
        self.timeline = found
        self._runner = runner

    def _wrap(self, found: Timeline) -> SyncTimeline:
        return SyncTimeline(found, self._runner)

    # -- reading (no waiting) ------------------------------------------------------------
    @property
    def thread_id(self) -> str:
        return self.timeline.thread_id

    @property
    def entries(self) -> list[Entry]:
        return self.timeline.entries

    @property
    def checkpoints(self) -> list[Any]:
        return self.timeline.checkpoints

    @property
    def steps(self) -> list[Any]:
        return self.timeline.steps

    def __len__(self) -> int:
        return len(self.timeline)

    def __getitem__(self, step: int) -> Entry:
        return self.timeline[step]

    def entry(self, step: int) -> Entry:
        return self.timeline.entry(step)

    def find(
        self, kind: str | None = None, *, node: str | None = None, text: str | None = None
    ) -> list[Entry]:
        return self.timeline.find(kind, node=node, text=text)

    def state(self, at: At | None = None) -> State:
        return self.timeline.state(at)

    def diff(self, a: At, b: At | None = None) -> StateDiff:
        return self.timeline.diff(a, b)

    def compare(
        self,
        other: SyncTimeline | Timeline,
        at: At | None = None,
        other_at: At | None = None,
    ) -> StateDiff:
        theirs = other.timeline if isinstance(other, SyncTimeline) else other
        return self.timeline.compare(theirs, at, other_at)

    def path(self) -> GraphPath:
        return self.timeline.path()

    def to_pandas(self) -> Any:
        return self.timeline.to_pandas()

    def __str__(self) -> str:
        return str(self.timeline)

    def __repr__(self) -> str:
        return repr(self.timeline).replace("<Timeline", "<SyncTimeline", 1)

    def _repr_html_(self) -> str:
        return self.timeline._repr_html_()

    # -- running again (waits) -----------------------------------------------------------
    def fork(
        self,
        at: At,
        update: Mapping[str, Any] | None = None,
        *,
        as_node: str | None = None,
        thread_id: str | None = None,
    ) -> SyncTimeline:
        """:meth:`Timeline.fork`, waited for."""
        call = self.timeline.fork(at, update, as_node=as_node, thread_id=thread_id)
        return self._wrap(self._runner.call(call))

    def replay(
        self, upto: At | None = None, *, check: bool = True, keep: bool = True
    ) -> ReplayResult:
        """:meth:`Timeline.replay`, waited for."""
        return self._runner.call(self.timeline.replay(upto, check=check, keep=keep))

    def what_if(self, step: int, output: Any, *, thread_id: str | None = None) -> SyncTimeline:
        """:meth:`Timeline.what_if`, waited for."""
        return self._wrap(
            self._runner.call(self.timeline.what_if(step, output, thread_id=thread_id))
        )

    def run(self, input: Any = None, **config: Any) -> SyncTimeline:
        """:meth:`Timeline.run`, waited for."""
        return self._wrap(self._runner.call(self.timeline.run(input, **config)))

    def refresh(self) -> SyncTimeline:
        """:meth:`Timeline.refresh`, waited for."""
        return self._wrap(self._runner.call(self.timeline.refresh()))

    def close(self) -> None:
        """Close the connection and stop the background loop (for every timeline sharing them)."""
        try:
            self._runner.call(self.timeline.aclose())
        except DebugError:
            return  # closed already
        finally:
            self._runner.close()

    def __enter__(self) -> SyncTimeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def timeline_sync(
    source: str,
    thread_id: str,
    graph: GraphSpec | None = None,
    **options: Any,
) -> SyncTimeline:
    """:func:`timeline` without ``await``, for scripts and notebook cells alike.

    Args:
        source: A checkpointer URL or a ``tether serve`` URL (opened on the
            timeline's own loop; a checkpointer already open is refused).
        thread_id: The thread.
        graph: As for :func:`timeline`.
        **options: As for :func:`timeline`.

    Returns:
        The timeline; :meth:`SyncTimeline.close` it (or use ``with``).
    """
    if isinstance(source, BaseCheckpointSaver):
        raise DebugError(
            "timeline_sync opens its own connection on a loop of its own: pass the checkpointer's "
            "URL, not an open checkpointer (or await tether.debug.timeline with it)"
        )
    runner = _Runner()
    try:
        return SyncTimeline(runner.call(timeline(source, thread_id, graph, **options)), runner)
    except BaseException:
        runner.close()
        raise
