"""Time-travel debugging: a run's timeline, diffs, forks, replay and what-if edits.

``timeline(source, thread_id, graph=None)`` reads a thread from a checkpointer
URL, an open checkpointer, or a ``tether serve`` URL, and joins its checkpoints
and its step log into one ordered :class:`Timeline`::

    tl = await timeline("sqlite:///agent.db", "thread-1", graph=build)
    tl.diff(2, 5)                                     # what changed, per channel
    await tl.replay()                                 # zero model calls, no tool effects
    alt = await tl.what_if(step=3, output='{"amount_cents": 1000}')

``timeline_sync`` gives the same calls without ``await`` (a :class:`SyncTimeline`
running on a loop of its own), for scripts and notebook cells alike.

Every module whose name starts with ``_`` is internal.
"""

from tether.debug._branch import new_thread_id
from tether.debug._checkpoints import Checkpoint, Task
from tether.debug._diff import ChannelChange, StateDiff
from tether.debug._entries import Entry
from tether.debug._path import GraphPath
from tether.debug._replay import Divergence, ReplayResult
from tether.debug._sync import SyncTimeline, timeline_sync
from tether.debug._timeline import State, Timeline, timeline
from tether.debug.errors import DebugError, ReplayDivergenceError

__all__ = [
    "ChannelChange",
    "Checkpoint",
    "DebugError",
    "Divergence",
    "Entry",
    "GraphPath",
    "ReplayDivergenceError",
    "ReplayResult",
    "State",
    "StateDiff",
    "SyncTimeline",
    "Task",
    "Timeline",
    "new_thread_id",
    "timeline",
    "timeline_sync",
]
