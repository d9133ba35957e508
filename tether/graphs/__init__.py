"""Reference agents and the deterministic pieces they run on.

* :class:`ScriptedChatModel`: an offline chat model that answers from a script
  and logs every call it really makes.
* :class:`FakePaymentsProvider`: a SQLite-backed fake payments service and
  outbox that honours idempotency keys and counts every attempt and effect.
* :mod:`tether.graphs.refund`: the refund agent from the design articles
  (``tether.graphs.refund:crash_target`` is its crash-test target), with the
  scenario it runs (:func:`refund_input`, and the files it writes in its
  working directory, :data:`CALLS_FILE` and :data:`PAYMENTS_FILE`).

``refund`` is the one public module; the others, whose names start with
``_``, are internal.
"""

from tether.graphs._payments import (
    FakeOrder,
    FakePaymentsError,
    FakePaymentsProvider,
    FakeRefund,
    PaymentCounts,
)
from tether.graphs._refund_scenario import CALLS_FILE, PAYMENTS_FILE, refund_input
from tether.graphs._scripted import (
    ScriptedCall,
    ScriptedChatModel,
    ScriptError,
    ScriptRule,
    after_tool,
    last_tool_result,
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
    "CALLS_FILE",
    "PAYMENTS_FILE",
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
    "last_tool_result",
    "on_first_turn",
    "planned_call",
    "read_calls",
    "refund_input",
    "refund_tools",
]
