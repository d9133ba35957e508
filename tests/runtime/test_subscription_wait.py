"""A subscription's timed wait obeys a cancel, even one that races its signal.

A worker's heartbeat loop waits on the ``control`` channel; on shutdown the
task is cancelled. Python 3.11's ``asyncio.wait_for`` drops a cancel that
arrives in the same loop iteration as the awaited event, so the loop went on
waiting and the worker never exited.
"""

from __future__ import annotations

import asyncio

import pytest

from tether.runtime.notify import Notifier


async def test_a_wait_cancelled_as_its_signal_arrives_is_cancelled() -> None:
    notifier = Notifier()
    async with notifier.subscribe("control") as subscription:
        waiting = asyncio.create_task(subscription.wait(10))
        await asyncio.sleep(0)  # the task now waits on the subscription
        notifier.publish_local("control")
        waiting.cancel()  # in the same iteration as the signal
        with pytest.raises(asyncio.CancelledError):
            await waiting


async def test_a_timed_wait_still_reports_a_signal_and_a_timeout() -> None:
    notifier = Notifier()
    async with notifier.subscribe("control") as subscription:
        assert await subscription.wait(0.01) is False
        notifier.publish_local("control")
        assert await subscription.wait(10) is True
