"""Version pins: a run keeps the graph, prompt, model and tools it started with.

``pin_versions(graph, ...)`` returns a copy of a compiled graph whose runs
record, before their first step, a fingerprint of the graph (nodes,
edges, state channels), the prompt version, the model id and the tool schema
versions. A resumed run (on any worker) compares them with what it runs now,
before the first node it runs in each process
(:mod:`._pinned_nodes`), whether or not that node records anything:
``policy="pinned"`` refuses a change with :class:`VersionMismatchError`;
``policy="migrate"`` continues and appends a ``version-change`` step. Either
way a change is never silent.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, Literal, TypeVar

from tether._instances import instance_key
from tether.steps._errors import VersionMismatchError
from tether.steps._io import Await, Flow
from tether.steps._log import scope_step
from tether.steps._pinned_nodes import pin_nodes
from tether.steps._scope import PINS_KEY, NodeScope

__all__ = [
    "VersionPins",
    "drop_thread",
    "ensure_pins",
    "ensure_pins_flow",
    "graph_fingerprint",
    "pin_versions",
]

G = TypeVar("G")
Policy = Literal["pinned", "migrate"]


def graph_fingerprint(graph: Any) -> str:
    """A short SHA-256 of a compiled graph's nodes, edges and state channels."""
    drawable = graph.get_graph()
    nodes = sorted(str(n) for n in drawable.nodes)
    edges = sorted(
        [e.source, e.target, bool(e.conditional), str(e.data or "")] for e in drawable.edges
    )
    channels = sorted(
        [name, type(ch).__name__, repr(getattr(ch, "ValueType", None))]
        for name, ch in graph.channels.items()
        if not name.startswith("branch:")
    )
    text = json.dumps({"nodes": nodes, "edges": edges, "channels": channels}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class VersionPins:
    """What a pinned graph's runs record at start and compare on resume."""

    policy: Policy
    graph: str
    prompt_version: str | None = None
    model_id: str | None = None
    tool_versions: dict[str, str] = field(default_factory=dict)

    def versions(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "prompt_version": self.prompt_version,
            "model_id": self.model_id,
            "tool_versions": dict(sorted(self.tool_versions.items())),
        }

    @cached_property
    def text(self) -> str:
        """:meth:`versions` as canonical text, written once (it names the check's cache entry)."""
        return json.dumps(self.versions(), sort_keys=True)


def pin_versions(
    graph: G,
    *,
    policy: Policy = "pinned",
    prompt_version: str | None = None,
    model_id: str | None = None,
    tool_versions: dict[str, str] | None = None,
) -> G:
    """A copy of ``graph`` whose runs are pinned to these versions.

    Args:
        graph: A compiled LangGraph graph.
        policy: ``"pinned"`` refuses to resume a run on other versions;
            ``"migrate"`` resumes it and records a ``version-change`` step.
        prompt_version: Your prompt's version label.
        model_id: The model the run uses.
        tool_versions: Tool name -> schema version.

    Returns:
        The graph, configured; use it in place of the original.

    Raises:
        ValueError: ``policy`` is not ``"pinned"`` or ``"migrate"``.
    """
    if policy not in ("pinned", "migrate"):
        raise ValueError(f"policy must be 'pinned' or 'migrate', got {policy!r}")
    pins = VersionPins(
        policy, graph_fingerprint(graph), prompt_version, model_id, dict(tool_versions or {})
    )
    configured: G = pin_nodes(graph, ensure_pins).with_config(configurable={PINS_KEY: pins})
    return configured


# (store, thread, versions) already recorded or compared in this process; least
# recently used first, bounded like ``known``'s keys (an evicted entry is compared again).
_MAX_CHECKED = 1024
_checked: OrderedDict[tuple[int, str, str], None] = OrderedDict()
_checked_lock = threading.Lock()


def drop_thread(thread_id: str) -> None:
    """Forget that the thread's versions were checked (under every store): compare again."""
    with _checked_lock:
        for marker in [m for m in _checked if m[1] == thread_id]:
            del _checked[marker]


def _marker(scope: NodeScope, pins: VersionPins) -> tuple[int, str, str]:
    return (instance_key(scope.store), scope.thread_id, pins.text)


def _checked_already(marker: tuple[int, str, str]) -> bool:
    with _checked_lock:
        if marker in _checked:
            _checked.move_to_end(marker)
            return True
        return False


def ensure_pins_flow(scope: NodeScope) -> Flow[VersionPins | None]:
    """:func:`ensure_pins` as a flow step: no operation once this thread's pins were checked.

    A pinned node checks the pins before its body runs (:mod:`._pinned_nodes`), so
    a recorded call in it finds them checked (in a sync node an ``Await`` is a hop to
    the store's event loop and back).
    """
    pins = scope.configurable.get(PINS_KEY)
    if isinstance(pins, VersionPins) and _checked_already(_marker(scope, pins)):
        return pins
    checked: VersionPins | None = yield Await(partial(ensure_pins, scope))
    return checked


async def ensure_pins(scope: NodeScope) -> VersionPins | None:
    """Record the run's versions, or compare them with the recorded ones (once per process)."""
    pins = scope.configurable.get(PINS_KEY)
    if not isinstance(pins, VersionPins):
        return None
    current = pins.versions()
    marker = _marker(scope, pins)
    if _checked_already(marker):
        return pins
    store = scope.store
    value = {"versions": current}
    if not await store.insert("pins", scope.thread_id, value, thread_id=scope.thread_id):
        record = await store.get("pins", scope.thread_id)
        old = record.value["versions"] if record else current
        changes = {k: (old.get(k), v) for k, v in current.items() if old.get(k) != v}
        if changes:
            if pins.policy == "pinned":
                raise VersionMismatchError(scope.thread_id, changes)
            await store.append_step(
                scope.thread_id,
                scope_step(
                    scope,
                    "version-change",
                    "versions",
                    graph_version=pins.graph,
                    prompt_version=pins.prompt_version,
                    model_id=pins.model_id,
                    detail={
                        "changes": {k: {"from": a, "to": b} for k, (a, b) in changes.items()},
                        "policy": pins.policy,
                    },
                ),
            )
            await store.upsert("pins", scope.thread_id, value, thread_id=scope.thread_id)
    with _checked_lock:
        _checked[marker] = None
        while len(_checked) > _MAX_CHECKED:
            _checked.popitem(last=False)
    return pins
