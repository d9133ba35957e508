"""The calls of a recorded model that recording cannot cover: refused inside a graph node.

Inside a node every call a recorded model makes is recorded, replayed and
charged to the run's budget, or refused here with an error naming what to
call instead; outside a graph nothing is recorded, so these pass through.

* The legacy ``generate`` path (``generate``, ``agenerate``, ``generate_prompt``
  and what is built on them) reaches the model without a record, a replay or
  a charge.
* ``astream_events`` would record the call (it runs ``astream``), but its
  events are those of the wrapped model's own run: a replay makes no such run,
  so a resumed node would see no answer at all.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig

from tether.steps._errors import StepsError
from tether.steps._scope import node_scope

__all__ = ["refuse_astream_events", "refuse_generate"]


def refuse_generate() -> None:
    """Raise inside a graph node: the ``generate`` path would not be recorded."""
    if node_scope() is not None:
        raise StepsError(
            "a recorded model's generate() path (generate, agenerate, generate_prompt) is "
            "not recorded, replayed or charged to the run's budget; inside a graph node call "
            "invoke, ainvoke, stream or astream"
        )


def refuse_astream_events(config: RunnableConfig | None) -> None:
    """Raise inside a graph node: a replayed call would yield no events to read it from."""
    if node_scope(config) is not None:
        raise StepsError(
            "astream_events() on a recorded model inside a graph node: its events come from "
            "the model's own run, which a replayed (recorded) call does not make, so a resumed "
            "node would see no answer; call astream or ainvoke in the node, and stream tokens "
            "from the graph (stream_mode='messages', or the graph's astream_events)"
        )
