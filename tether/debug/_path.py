"""The graph with a run's path drawn on it, as Mermaid.

The nodes the run visited are numbered in the order they ran (a node that ran
three times shows three numbers) and shaded; where the run stopped (the nodes
due next, or the end) is outlined in red.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tether.debug._checkpoints import Checkpoint

__all__ = ["GraphPath", "graph_path"]

_START, _END = "__start__", "__end__"


@dataclass(frozen=True, repr=False)
class GraphPath:
    """A run's path through its graph.

    Attributes:
        visited: The nodes that ran, in order.
        stopped_at: Where the run stopped: the nodes due next, or ``("__end__",)``.
        mermaid: The Mermaid text of the graph with the path drawn on it.
    """

    visited: tuple[str, ...]
    stopped_at: tuple[str, ...]
    mermaid: str

    def __str__(self) -> str:
        return self.mermaid

    def __repr__(self) -> str:
        return f"<GraphPath visited={' -> '.join(self.visited)} stopped_at={self.stopped_at}>"

    def _repr_markdown_(self) -> str:
        return f"```mermaid\n{self.mermaid}\n```"


def _ident(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _label(text: str) -> str:
    return text.replace('"', "'")


def run_path(line: Sequence[Checkpoint]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The nodes that ran along ``line``, in order, and where it stopped."""
    visited: list[str] = []
    for start, after in itertools.pairwise(line):
        if after.source == "loop" or start.source == "input":
            visited.extend(t.name for t in start.tasks)
    last = line[-1] if line else None
    stopped = tuple(t.name for t in last.tasks) if last and last.tasks else (_END,)
    return tuple(visited), stopped


def graph_path(shape: Mapping[str, Any] | None, line: Sequence[Checkpoint]) -> GraphPath:
    """The Mermaid drawing of ``shape`` (LangGraph's graph JSON) with ``line``'s path on it."""
    visited, stopped = run_path(line)
    nodes = [str(n["id"]) for n in (shape or {}).get("nodes", [])]
    for name in (*visited, *stopped):
        if name not in nodes:
            nodes.append(name)
    order: dict[str, list[int]] = {}
    for i, name in enumerate(visited, start=1):
        order.setdefault(name, []).append(i)
    out = ["graph TD"]
    for name in nodes:
        numbers = order.get(name)
        label = f"{name} · {', '.join(map(str, numbers))}" if numbers else name
        out.append(f'    {_ident(name)}["{_label(label)}"]')
    for edge in (shape or {}).get("edges", []):
        arrow = "-.->" if edge.get("conditional") else "-->"
        out.append(f"    {_ident(str(edge['source']))} {arrow} {_ident(str(edge['target']))}")
    out.append("    classDef visited fill:#d6eaff,stroke:#1f6feb")
    out.append("    classDef stopped stroke:#d1242f,stroke-width:3px")
    ran = sorted({_ident(n) for n in visited})
    if ran:
        out.append(f"    class {','.join(ran)} visited")
    out.append(f"    class {','.join(sorted({_ident(n) for n in stopped}))} stopped")
    return GraphPath(visited, stopped, "\n".join(out))
