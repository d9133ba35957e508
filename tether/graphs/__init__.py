"""Reference agents and the deterministic pieces they run on.

* :class:`ScriptedChatModel`: an offline chat model that answers from a script
  and logs every call it really makes.
* :class:`FakePaymentsProvider`: a SQLite-backed fake payments service and
  outbox that honours idempotency keys and counts every attempt and effect.
* :mod:`tether.graphs.refund`: the refund agent from the design articles.
"""

from tether.graphs._payments import (
    FakeOrder,
    FakePaymentsError,
    FakePaymentsProvider,
    FakeRefund,
    PaymentCounts,
)
from tether.graphs._scripted import (
    ScriptedCall,
    ScriptedChatModel,
    ScriptError,
    ScriptRule,
    after_tool,
    on_first_turn,
    planned_call,
    read_calls,
)
from tether.graphs.refund import (
    RefundGate,
    build_refund_graph,
    refund_tools,
)

__all__ = [
    "FakeOrder",
    "FakePaymentsError",
    "FakePaymentsProvider",
    "FakeRefund",
    "PaymentCounts",
    "RefundGate",
    "ScriptError",
    "ScriptRule",
    "ScriptedCall",
    "ScriptedChatModel",
    "after_tool",
    "build_refund_graph",
    "on_first_turn",
    "planned_call",
    "read_calls",
    "refund_tools",
]
