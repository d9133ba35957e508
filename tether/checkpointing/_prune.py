"""Backend-neutral rules for ``prune``: argument checks and what ``keep_latest`` keeps.

Every backend reads a thread's checkpoints as :class:`CheckpointRow` values and
lets :func:`plan_keep_latest` decide; only storage access is per backend. The
rules follow LangGraph's ``AsyncPostgresSaver.aprune``:

* a thread that uses a ``DeltaChannel`` is refused before anything is deleted;
* each namespace keeps its latest checkpoint, plus that checkpoint's parent when
  it predates checkpoint format v4 and reads pending sends from there;
* a kept checkpoint whose parent is deleted is left with no parent;
* a subgraph call's namespace (its task id after a ``:``) goes with the root
  checkpoint the call started from, once that one is saved and not kept;
* writes go with the checkpoints deleted (writes of a checkpoint not saved yet
  stay: a run saves them before its checkpoint), and blobs no kept checkpoint
  refers to are freed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.checkpointing._cascade import check_thread_ids
from tether.errors import ConfigurationError

__all__ = [
    "DELTA_MARKERS",
    "PRUNE_STRATEGIES",
    "CheckpointRow",
    "PrunePlan",
    "check_prune_args",
    "latest_per_namespace",
    "plan_keep_latest",
    "refuse_delta_threads",
    "sends_parent_candidates",
    "uses_delta_channel",
]

PRUNE_STRATEGIES = ("keep_latest", "delete")

# Metadata keys LangGraph writes on threads that use a DeltaChannel, whose value
# keep_latest could not rebuild once older checkpoints are gone.
DELTA_MARKERS = ("counters_since_delta_snapshot", "delta_writes_versioned")

# Checkpoint format from which pending sends live in the checkpoint itself.
_SENDS_IN_CHECKPOINT = 4


def check_prune_args(thread_ids: Sequence[str], strategy: str) -> list[str]:
    """Validate ``prune`` arguments before anything is deleted.

    Returns:
        The thread ids as a list of strings.

    Raises:
        IdArgumentError: ``thread_ids`` is a single string or bytes (which would
            otherwise be pruned one character at a time), or not a collection.
        ConfigurationError: ``strategy`` is unknown.
    """
    ids = check_thread_ids(thread_ids)
    if strategy not in PRUNE_STRATEGIES:
        raise ConfigurationError(
            f"unknown prune strategy {strategy!r}; use one of {', '.join(PRUNE_STRATEGIES)}"
        )
    return ids


def uses_delta_channel(metadata: Mapping[str, Any]) -> bool:
    """Whether a checkpoint's metadata shows its thread uses a ``DeltaChannel``."""
    return any(marker in metadata for marker in DELTA_MARKERS)


def refuse_delta_threads(delta_threads: Iterable[str]) -> None:
    """Raise if any thread uses a ``DeltaChannel``; call before deleting anything.

    Raises:
        NotImplementedError: Naming every such thread, and what to do instead.
    """
    if found := sorted(set(delta_threads)):
        raise NotImplementedError(
            f"keep_latest can't prune threads that use a DeltaChannel: {', '.join(found)}; "
            "use strategy='delete' or leave them"
        )


@dataclass(frozen=True)
class CheckpointRow:
    """What ``keep_latest`` needs to know of one stored checkpoint.

    Attributes:
        ns: The checkpoint namespace (``""`` for the root graph).
        checkpoint_id: The checkpoint id.
        parent_id: The parent checkpoint's id, if any.
        root_id: ``metadata["parents"][""]``: the root graph's checkpoint a
            subgraph call started from, if any.
    """

    ns: str
    checkpoint_id: str
    parent_id: str | None = None
    root_id: str | None = None

    @classmethod
    def from_metadata(
        cls, ns: str, checkpoint_id: str, parent_id: str | None, metadata: Mapping[str, Any]
    ) -> CheckpointRow:
        """Build a row, reading the root checkpoint from the metadata's ``parents``."""
        parents = metadata.get("parents") or {}
        return cls(ns, checkpoint_id, parent_id or None, parents.get("") or None)


@dataclass
class PrunePlan:
    """What ``keep_latest`` does to one thread.

    Attributes:
        deleted: ``(ns, checkpoint_id)`` of every checkpoint to delete, with its
            writes, outside the dropped namespaces.
        dropped_namespaces: Subgraph-call namespaces to delete whole
            (checkpoints, writes and blobs).
        orphaned: ``(ns, checkpoint_id)`` of kept checkpoints whose parent is
            not kept; their parent pointer is to be cleared.
        kept: ``(ns, checkpoint_id)`` of every checkpoint kept.
    """

    deleted: set[tuple[str, str]] = field(default_factory=set)
    dropped_namespaces: set[str] = field(default_factory=set)
    orphaned: set[tuple[str, str]] = field(default_factory=set)
    kept: set[tuple[str, str]] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.deleted or self.dropped_namespaces or self.orphaned)


def latest_per_namespace(rows: Iterable[CheckpointRow]) -> dict[str, CheckpointRow]:
    """Each namespace's latest checkpoint (the highest id, as ``get_tuple`` loads)."""
    heads: dict[str, CheckpointRow] = {}
    for row in rows:
        head = heads.get(row.ns)
        if head is None or row.checkpoint_id > head.checkpoint_id:
            heads[row.ns] = row
    return heads


def sends_parent_candidates(
    heads: Mapping[str, CheckpointRow], versions: Mapping[str, int]
) -> dict[str, str]:
    """Per namespace, the head's parent to keep if it holds pending sends.

    Args:
        heads: :func:`latest_per_namespace` of the thread.
        versions: Per namespace, the head checkpoint's format version (``"v"``).

    Returns:
        The parents of heads older than v4; the backend keeps those of them
        that have writes on the ``TASKS`` channel.
    """
    return {
        ns: head.parent_id
        for ns, head in heads.items()
        if head.parent_id and versions.get(ns, _SENDS_IN_CHECKPOINT) < _SENDS_IN_CHECKPOINT
    }


def plan_keep_latest(rows: Sequence[CheckpointRow], sends_parents: Mapping[str, str]) -> PrunePlan:
    """Decide what ``keep_latest`` deletes from one thread.

    Args:
        rows: Every checkpoint of the thread.
        sends_parents: Per namespace, the head's parent that holds the pending
            sends a pre-v4 head reads (see :func:`sends_parent_candidates`).
    """
    heads = latest_per_namespace(rows)
    kept = {ns: {head.checkpoint_id} for ns, head in heads.items()}
    for ns, parent in sends_parents.items():
        kept[ns].add(parent)
    root_ids = {r.checkpoint_id for r in rows if r.ns == ""}
    kept_roots = kept.get("", set())
    # A call's namespace has its task id after a ":", unlike a checkpointer=True
    # subgraph's, whose state outlives each call. Runs save in the background, so
    # a call can be saved before its root checkpoint: only a saved root counts.
    calls = {
        ns
        for ns, head in heads.items()
        if ":" in ns and head.root_id in root_ids and head.root_id not in kept_roots
    }
    plan = PrunePlan(dropped_namespaces=calls)
    for row in rows:
        if row.ns in calls:
            continue
        if row.checkpoint_id in kept[row.ns]:
            plan.kept.add((row.ns, row.checkpoint_id))
        else:
            plan.deleted.add((row.ns, row.checkpoint_id))
    plan.orphaned = {
        (r.ns, r.checkpoint_id)
        for r in rows
        if (r.ns, r.checkpoint_id) in plan.kept
        and r.parent_id
        and (r.ns, r.parent_id) not in plan.kept
    }
    return plan
