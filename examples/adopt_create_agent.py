"""Make an existing ``create_agent`` agent durable by changing three lines.

The agent below is LangChain's ``create_agent`` with one tool. Making it durable
takes three changes, marked ``# tether (1/3)`` to ``(3/3)``:

1. wrap the model with ``recorded``: every answer is recorded before the agent
   moves on, and a resumed run replays it instead of asking the model again;
2. wrap the tools with ``durable_tool``: each result is recorded, and a tool
   that takes an ``idempotency_key`` gets the same key on every retry;
3. pass a checkpointer from ``open_checkpointer``.

The model is a scripted stand-in (``scripted_support_model`` in
``support_desk.py``: no network, same answers every run); swap in any LangChain
chat model, e.g. ``init_chat_model("openai:gpt-4o-mini")``.

Try a crash: the first command kills itself (SIGKILL, like a power cut) right
after the refund's result is recorded, before the graph checkpoints it; the
second resumes the thread in a fresh process, replays the recorded refund (no
second refund request) and asks the model only for the final answer.

    python examples/adopt_create_agent.py --crash
    python examples/adopt_create_agent.py

Files (``support.db``, ``payments.db``, ``model_calls.log``) go to the current
directory; delete them to start over.
"""

from __future__ import annotations

import asyncio
import sys

from langchain.agents import create_agent
from support_desk import (
    CHECKPOINTS_URL,
    crash_if_asked,
    refund_order,
    run_ticket,
    scripted_support_model,
)

from tether import durable_tool, open_checkpointer, recorded


async def main() -> None:
    model = recorded(scripted_support_model())  # tether (1/3)
    tools = [durable_tool(refund_order)]  # tether (2/3)
    async with open_checkpointer(CHECKPOINTS_URL) as saver:  # tether (3/3)
        agent = create_agent(model, tools, checkpointer=saver)
        await run_ticket(agent, saver)


if __name__ == "__main__":
    crash_if_asked(sys.argv)
    asyncio.run(main())
