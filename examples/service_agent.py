"""The support agent of ``adopt_create_agent.py``, served by tether workers.

``examples/langgraph.json`` names this module's ``agent``, as LangGraph's own
server would. Nothing here opens a checkpointer: the worker compiles the graph
with its own (fenced, on the run store's database) and runs it as a row that any
worker can take over::

    tether worker --url sqlite:///service.db --config examples/langgraph.json &
    tether runs create support --url sqlite:///service.db --thread ticket-42 \\
        --input '{"messages": [{"role": "user", "content": "Please refund order A-1001."}]}' \\
        --wait
    tether runs events RUN_ID --url sqlite:///service.db

Kill the worker with ``kill -9`` in the middle of a run and start another: it
takes the run over once the lease expires, replays the recorded model answers
and refund result, and finishes with one refund issued. ``payments.db`` and
``model_calls.log`` go to the worker's current directory.
"""

from __future__ import annotations

from langchain.agents import create_agent
from support_desk import ORDER, PAYMENTS_FILE, refund_order, scripted_support_model

from tether import durable_tool, recorded
from tether.graphs import FakePaymentsProvider

FakePaymentsProvider(PAYMENTS_FILE).add_order(ORDER)

agent = create_agent(recorded(scripted_support_model()), [durable_tool(refund_order)])
