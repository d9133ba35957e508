"""A pinned graph's nodes check the run's versions before they run, recorded calls or not.

``pin_versions`` wraps each node of the graph copy it returns in a
:class:`PinnedNode`, which runs the pins' check (``ensure_pins``: compare, or
first record, the run's versions) before the node's body runs. So the check
comes before the run's first step in each process, whether or not that step
records anything. The comparison is made once per thread and process (the
check caches it); later nodes only look the cache up.

The wrapper starts no run of its own (no callback, no trace entry) and keeps
the node's subgraphs, so streaming, tracing and subgraph checkpoints are the
node's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.pregel._utils import validate_timeout_supported

from tether.steps._scope import NodeScope, node_scope

__all__ = ["AsyncPinnedNode", "Check", "PinnedNode", "pin_nodes"]

Check = Callable[[NodeScope], Coroutine[Any, Any, Any]]


class PinnedNode(Runnable[Any, Any]):
    """A node's runnable that checks the run's version pins first."""

    def __init__(self, node: Runnable[Any, Any], check: Check) -> None:
        self.node = node
        self.check = check
        self.name = node.get_name()

    def __repr__(self) -> str:
        return f"pinned({self.node!r})"

    def _check(self, config: RunnableConfig | None) -> None:
        scope = node_scope(config)
        if scope is not None and scope.pinned:
            scope.store.sync.call(self.check(scope))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        self._check(config)
        return self.node.invoke(input, config, **kwargs)

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        self._check(config)
        yield from self.node.stream(input, config, **kwargs)


class AsyncPinnedNode(PinnedNode):
    """A :class:`PinnedNode` of an async node: checks and runs it without a thread.

    Only async nodes get ``ainvoke``/``astream`` of their own, so LangGraph (and
    a runtime's step timeouts) see a sync node as sync, as without the wrapper.
    """

    async def _acheck(self, config: RunnableConfig | None) -> None:
        scope = node_scope(config)
        if scope is not None and scope.pinned:
            await self.check(scope)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        await self._acheck(config)
        return await self.node.ainvoke(input, config, **kwargs)

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        await self._acheck(config)
        async for chunk in self.node.astream(input, config, **kwargs):
            yield chunk


def _wrap(node: Runnable[Any, Any], check: Check) -> PinnedNode:
    try:
        validate_timeout_supported(node, name="")  # LangGraph's own test for an async node
    except ValueError:
        return PinnedNode(node, check)
    return AsyncPinnedNode(node, check)


def pin_nodes(graph: Any, check: Check) -> Any:
    """A copy of the compiled ``graph`` whose nodes run ``check`` first."""
    nodes = {
        name: node.copy({"bound": _wrap(node.bound, check), "subgraphs": node.subgraphs})
        for name, node in graph.nodes.items()
    }
    return graph.copy({"nodes": nodes})
