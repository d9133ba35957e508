"""A child process that decides an approval and resumes the run, maybe killed on the way.

Usage: ``python -m tests.approvals.decide_child <url> <options-json> <approval-id> <args-sha256>``.
The graph is ``tests.approvals.graphs:gate_graph`` over the crash harness's
checkpoint boundaries; the parent sets ``TETHER_CRASH_AT`` to SIGKILL this
process at one of them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tests.approvals import graphs
from tests.runtime.progress_child import WritesFirstSaver
from tether import open_checkpointer
from tether.approvals import decide


async def main(url: str, options: dict[str, Any], approval_id: str, sha: str) -> None:
    async with open_checkpointer(url, **options) as saver:
        graph = graphs.gate_graph(WritesFirstSaver(saver))
        result = await decide(
            saver, "t1", approval_id, "approve", graph=graph, by="alice", args_sha256=sha
        )
        print(json.dumps({"finished": result.finished}))


if __name__ == "__main__":
    url, options, approval_id, sha = sys.argv[1:5]
    asyncio.run(main(url, json.loads(options), approval_id, sha))
