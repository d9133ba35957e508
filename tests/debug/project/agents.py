"""The refund agent served by ``tether serve`` for the debugger's remote tests.

Its fake world (payments database, model calls log) is the server's working directory.
"""

from __future__ import annotations

from pathlib import Path

from tether.graphs import build_refund_graph

refund = build_refund_graph(checkpointer=None, workdir=Path.cwd())  # type: ignore[arg-type]
