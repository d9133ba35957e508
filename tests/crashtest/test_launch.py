"""Children forked from the fork server report their own exit code, even under threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.crashtest.children import end_as, sleep_long
from tether.crashtest._launch import run_forked

_EXPECTED = {0: -9, 1: 0, 2: 3}


@pytest.mark.slow
def test_exit_codes_are_exact_when_threads_start_children_together() -> None:
    # start() in one thread polls the children of the others; unguarded, a poll
    # racing the owner's join() turned a child's exit code into 255 now and then.
    kinds = [i % 3 for i in range(300)]

    def one(kind: int) -> int | None:
        return run_forked(end_as, (kind,), name=f"end-as-{kind}", timeout=120)

    with ThreadPoolExecutor(max_workers=6) as pool:
        codes = list(pool.map(one, kinds))
    assert codes == [_EXPECTED[k] for k in kinds]


def test_a_child_that_outlives_its_timeout_is_killed() -> None:
    assert run_forked(sleep_long, (), name="sleeper", timeout=0.5) is None
