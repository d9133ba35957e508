"""Deterministic replay: run a thread's steps again from the log and check each one.

The thread's checkpoints and records are copied into a scratch thread (see
:mod:`tether.debug._branch`). Then each super-step the run made is run again
from the checkpoint it started from, in replay-only mode
(:func:`tether.steps.replay_only`): every model answer and tool result comes
from its record, the model is asked nothing and no tool runs. The state each
super-step produces is compared with the one recorded after it. The first
super-step that differs (another state, other nodes next, a call the record
does not match or a call that was never made) means the graph code changed
since the run: the replay stops there and says where.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from tether.debug._branch import branch, new_thread_id, steps_before
from tether.debug._checkpoints import Checkpoint
from tether.debug._diff import StateDiff, diff_states
from tether.debug._entries import Entry
from tether.debug._render import html_table, text_table
from tether.debug.errors import DebugError
from tether.steps import Step, StepsError, copy_for_replay, replay_only

__all__ = ["Divergence", "ReplayResult", "replay_thread"]

_START = "__start__"


@dataclass(frozen=True)
class Divergence:
    """Where a replay first differed from the recorded run.

    Attributes:
        step: The first timeline step of the super-step that diverged (``None``
            if that super-step recorded no step).
        nodes: The nodes that ran in it.
        checkpoint_id: The checkpoint it started from.
        reason: What differed.
        changes: The recorded state against the replayed one, when both exist.
    """

    step: int | None
    nodes: tuple[str, ...]
    checkpoint_id: str
    reason: str
    changes: StateDiff | None = None

    def to_json(self) -> dict[str, Any]:
        """The divergence as JSON (its state changes as text)."""
        changes = None if self.changes is None else str(self.changes)
        return {
            "step": self.step,
            "nodes": list(self.nodes),
            "checkpoint_id": self.checkpoint_id,
            "reason": self.reason,
            "changes": changes,
        }

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "a step"
        text = (
            f"replay diverged at {where} (node {', '.join(self.nodes) or '?'}, from checkpoint "
            f"{self.checkpoint_id}): {self.reason}"
        )
        return f"{text}\n{self.changes}" if self.changes else text


@dataclass(frozen=True)
class ReplayResult:
    """What a replay did.

    Attributes:
        thread_id: The scratch thread it ran in.
        supersteps: How many super-steps were replayed and matched.
        divergence: The first diverging step, or ``None`` if all matched.
    """

    thread_id: str
    supersteps: int
    divergence: Divergence | None

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def to_json(self) -> dict[str, Any]:
        divergence = None if self.divergence is None else self.divergence.to_json()
        return {
            "thread_id": self.thread_id,
            "supersteps": self.supersteps,
            "divergence": divergence,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ReplayResult:
        """A result a server sent (a divergence's state changes come as text, in its reason)."""
        found = doc.get("divergence")
        divergence = None
        if found is not None:
            reason = found["reason"] + (f"\n{found['changes']}" if found.get("changes") else "")
            divergence = Divergence(
                found["step"], tuple(found["nodes"]), found["checkpoint_id"], reason
            )
        return cls(doc["thread_id"], int(doc["supersteps"]), divergence)

    def _rows(self) -> list[tuple[str, str]]:
        rows = [("scratch thread", self.thread_id), ("super-steps matched", str(self.supersteps))]
        rows.append(("divergence", "none" if self.divergence is None else str(self.divergence)))
        return rows

    def __str__(self) -> str:
        return text_table(("replay", ""), self._rows())

    def _repr_html_(self) -> str:
        return html_table(("replay", ""), self._rows())


def _first_step(entries: Sequence[Entry], checkpoint_id: str) -> int | None:
    return next((e.step for e in entries if e.checkpoint_id == checkpoint_id), None)


async def _one(
    graph: Pregel[Any, Any], thread_id: str, start: Checkpoint, recorded: Checkpoint
) -> str | StateDiff | None:
    """Run the super-step from ``start``: ``None`` if it reproduced ``recorded``, else why not.

    ``start`` is the newest checkpoint of ``thread_id``, and the run names no
    checkpoint: LangGraph resumes it in place. Naming an older checkpoint would
    be time travel, which first writes a fork checkpoint with a new id, and the
    tasks would get new ids that no record is kept under.
    """
    config: Any = {"configurable": {"thread_id": thread_id}}
    try:
        await graph.ainvoke(None, replay_only(config), interrupt_after="*")
    except StepsError as exc:
        return str(exc)
    now = await graph.aget_state(config)
    parent = (now.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    if parent != start.checkpoint_id:
        return "the super-step wrote no checkpoint (it stopped before finishing)"
    changes = diff_states(recorded.values, now.values, at_a="recorded", at_b="replayed")
    if changes:
        return changes
    if sorted(now.next) != sorted(recorded.next):
        return f"next nodes {sorted(now.next)} were {sorted(recorded.next)} in the recorded run"
    return None


async def replay_thread(
    graph: Pregel[Any, Any],
    thread_id: str,
    line: Sequence[Checkpoint],
    steps: Sequence[Step],
    entries: Sequence[Entry],
    *,
    until: str | None = None,
    keep_diverged: bool = True,
) -> ReplayResult:
    """Replay ``line``'s super-steps (up to the one starting at ``until``).

    Each super-step runs in a scratch thread of its own holding just its start
    checkpoint and its tasks' records; a super-step that matched has its
    scratch thread deleted, the one that diverged keeps it for inspection.
    """
    saver = graph.checkpointer
    if not isinstance(saver, BaseCheckpointSaver):
        raise DebugError("replay needs a graph compiled with a checkpointer")
    scratch = new_thread_id(thread_id, "replay")
    matched = 0
    for index, (start, recorded) in enumerate(itertools.pairwise(line)):
        if recorded.source != "loop" or all(t.name == _START for t in start.tasks):
            continue  # written by an update, or the input entering: no node code ran
        here = f"{scratch}.{index}"
        await branch(saver, thread_id, here, [start], steps_before([start], steps, thread_id))
        await copy_for_replay(saver, thread_id, here, start.task_ids)
        outcome = await _one(graph, here, start, recorded)
        if outcome is not None:
            divergence = Divergence(
                step=_first_step(entries, start.checkpoint_id),
                nodes=tuple(t.name for t in start.tasks),
                checkpoint_id=start.checkpoint_id,
                reason=outcome if isinstance(outcome, str) else "the state differs",
                changes=outcome if isinstance(outcome, StateDiff) else None,
            )
            if not keep_diverged:
                await saver.adelete_thread(here)
            return ReplayResult(here, matched, divergence)
        await saver.adelete_thread(here)
        matched += 1
        if start.checkpoint_id == until:
            break
    return ReplayResult(scratch, matched, None)
