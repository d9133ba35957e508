"""A process that decides a compensation request without the graph (as a server or CLI does).

``python -m tests.compensation.graphless_decider URL OPTIONS APPROVAL_ID ARGS`` edits the
request with ``ARGS`` (JSON) on the checkpointer at ``URL`` (``OPTIONS``: JSON keyword
arguments of ``open_checkpointer``) and prints ``stored`` or the refusal's message. No
graph is built here, so no tool schema is registered in this process: only what the
request carries can check the edit. A worker (the test) continues the compensation.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tether import open_checkpointer
from tether.approvals import ApprovalError, DecisionResult, decide, get_approval


class _Stores:
    """A resumer that only lets the decision be stored; another process continues it."""

    async def is_pending(self, request: Any) -> bool:
        return True

    async def resume(self, request: Any, doc: dict[str, Any]) -> DecisionResult:
        return DecisionResult(request.approval_id, doc, [], False, {})


async def _main(url: str, options: str, approval_id: str, args: str) -> str:
    async with open_checkpointer(url, **json.loads(options)) as saver:
        request = (await get_approval(saver, approval_id)).request
        try:
            await decide(
                saver,
                request.thread_id,
                approval_id,
                "edit",
                by="dana",
                args_sha256=request.args_sha256,
                edited_args=json.loads(args),
                resumer=_Stores(),
            )
        except ApprovalError as exc:
            return str(exc)
    return "stored"


if __name__ == "__main__":
    print(asyncio.run(_main(*sys.argv[1:5])))
