"""The entries of a timeline: the step log and the checkpoints, joined in one order.

A model or tool step names the task it ran in; LangGraph lists each
checkpoint's tasks, so the step's checkpoint is the one whose tasks hold its
task id: the state it started from, where a fork or a what-if goes back to.
Interrupts and errors are not in the step log; they come from the tasks of the
checkpoints, placed after the steps of the same task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tether.debug._checkpoints import Checkpoint
from tether.debug._render import as_message, message_line, short
from tether.steps import Step

__all__ = ["Entry", "EntryKind", "build_entries", "root_task", "task_path"]

EntryKind = Literal[
    "model",
    "tool",
    "approval",
    "interrupt",
    "error",
    "cancel",
    "budget",
    "version-change",
    "compensation",
]


@dataclass(frozen=True)
class Entry:
    """One row of a timeline.

    Attributes:
        step: Position in the timeline (what ``state``, ``fork`` and ``what_if`` take).
        node: The graph node.
        time: When it happened (UTC).
        kind: ``model``, ``tool``, ``approval``, ``interrupt``, ``error``, ``cancel``,
            ``budget``, ``version-change`` or ``compensation`` (an undo of an earlier effect).
        summary: One line saying what happened.
        tokens: Tokens the step used (model steps).
        cost_usd: What the step cost.
        checkpoint_id: The checkpoint the step's task started from.
        task_id: LangGraph's task id.
        log_index: The step's index in the step log (``None`` for interrupts and errors).
        output: The recorded output (a model's message, a tool's result), if any.
        namespace: The subgraph the step ran in (``outer`` or ``outer/inner``), ``""``
            for the root graph; its ``checkpoint_id`` is then the root checkpoint the
            subgraph's parent task started from.
    """

    step: int
    node: str
    time: datetime
    kind: EntryKind
    summary: str
    tokens: int
    cost_usd: float
    checkpoint_id: str | None
    task_id: str
    log_index: int | None = None
    output: Any = None
    namespace: str = ""

    def row(self) -> tuple[Any, ...]:
        tokens = self.tokens or ""
        cost = f"{self.cost_usd:.6f}" if self.cost_usd else ""
        when = self.time.strftime("%H:%M:%S.%f")[:-3]
        return (
            self.step,
            when,
            self.kind,
            f"{self.namespace}/{self.node}" if self.namespace else self.node,
            self.summary,
            tokens,
            cost,
            self.checkpoint_id or "",
        )


HEADERS = ("step", "time", "kind", "node", "summary", "tokens", "cost_usd", "checkpoint")


def _summary(step: Step) -> str:
    message = as_message(step.output)
    if message is not None:
        return message_line(message)
    if step.kind == "tool":
        return f"{step.name} → {short(step.output)}"
    if step.kind == "approval":
        output = step.output if isinstance(step.output, dict) else {}
        outcome = output.get("outcome") or output.get("decision") or ""
        return short(f"{step.name} {outcome}".strip())
    return short(f"{step.name} {short(step.output, 60)}")


def _kind(step: Step) -> EntryKind:
    if step.kind == "approval" and step.detail.get("event") == "cancelled":
        return "cancel"
    return step.kind


def task_path(step: Step, thread_id: str) -> tuple[tuple[str, str], ...]:
    """``(node, task id)`` of each graph level ``step`` ran in, root first (from its record
    key ``thread|ns|task|suffix``, ``ns`` being ``node:task`` segments); ``()`` if unknown."""
    prefix, own = f"{thread_id}|", f"|{step.task_id}|"
    key = step.key or ""
    if not step.task_id or not key.startswith(prefix) or own not in key[len(prefix) :]:
        return ()
    namespace = key[len(prefix) : key.index(own, len(prefix))]
    levels = [segment.rpartition(":") for segment in namespace.split("|") if segment]
    return tuple((node, task) for node, _, task in levels)


def root_task(step: Step, thread_id: str) -> str:
    """The root graph's task ``step`` ran under: its own, or its subgraph's parent task."""
    path = task_path(step, thread_id)
    return path[0][1] if path else step.task_id


def _namespace(step: Step, thread_id: str) -> str:
    return "/".join(node for node, _ in task_path(step, thread_id)[:-1])


def _home(task_id: str, line: Sequence[Checkpoint]) -> Checkpoint | None:
    return next((c for c in line if task_id in c.task_ids), None)


def _at(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, UTC)


def build_entries(
    line: Sequence[Checkpoint], steps: Sequence[Step], thread_id: str = ""
) -> list[Entry]:
    """The timeline's entries, in the order things happened (a subgraph's steps joined to
    the root checkpoint their parent task started from)."""
    rows: list[tuple[datetime, int, Entry]] = []
    last_of_task: dict[str, datetime] = {}
    for step in steps:
        home = _home(root_task(step, thread_id), line) if step.task_id else None
        when = _at(step.started_at)
        last_of_task[step.task_id] = max(when, last_of_task.get(step.task_id, when))
        entry = Entry(
            step=0,
            node=step.node,
            time=when,
            kind=_kind(step),
            summary=_summary(step),
            tokens=int(step.usage.get("total_tokens", 0)),
            cost_usd=step.cost_usd,
            checkpoint_id=home.checkpoint_id if home else None,
            task_id=step.task_id,
            log_index=step.index,
            output=step.output,
            namespace=_namespace(step, thread_id),
        )
        rows.append((when, 0, entry))
    for checkpoint in line:
        for task in checkpoint.tasks:
            found: list[tuple[EntryKind, str]] = [("interrupt", short(v)) for v in task.interrupts]
            if task.error:
                found.append(("error", short(task.error)))
            for kind, text in found:
                when = last_of_task.get(task.id, checkpoint.created_at)
                entry = Entry(
                    0, task.name, when, kind, text, 0, 0.0, checkpoint.checkpoint_id, task.id
                )
                rows.append((when, 1, entry))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [_numbered(entry, i) for i, (_, _, entry) in enumerate(rows)]


def _numbered(entry: Entry, step: int) -> Entry:
    return Entry(**{**entry.__dict__, "step": step})
