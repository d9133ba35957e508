"""A sweep in its own process, so a test can SIGKILL it mid-batch (``TETHER_CRASH_AT``).

Usage: ``python -m tests.retention.sweep_child STORE_URL CHECKPOINTS_URL [KEY_PREFIX]``;
prints the report as JSON when it finishes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any

from tests.retention.world import NOW
from tether.retention import RetentionPolicy, Rule, sweep
from tether.runtime import Runtime

POLICY = RetentionPolicy(rules=(Rule("success", timedelta(days=30), "delete"),), batch_size=2)


async def main(store_url: str, checkpoints_url: str, prefix: str | None) -> None:
    options: dict[str, Any] = {"key_prefix": prefix} if prefix else {}
    async with Runtime(store_url, checkpoints_url=checkpoints_url, **options) as rt:
        report = await sweep(rt, POLICY, now=NOW)
    print(json.dumps(report.to_dict()))


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0], args[1], args[2] if len(args) > 2 else None))
