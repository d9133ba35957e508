"""Checking the step log's hash chain: where it breaks, and the head to keep elsewhere.

Every step carries a link that covers the link of the step before it (see
``docs/steps.md``), so an edited, inserted or removed step, even one changed
directly in the database, breaks the chain at a place :func:`verify_chain`
names. A log that was cut short, or deleted whole, is still a valid chain:
compare :func:`chain_head` with a head kept elsewhere (the audit summary keeps
one), or pass it as ``expected_head``.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.store import ChainHead, ChainReport, store_for

__all__ = ["chain_head", "chain_head_sync", "verify_chain", "verify_chain_sync"]


async def verify_chain(
    checkpointer: BaseCheckpointSaver[Any],
    thread_id: str,
    *,
    expected_head: ChainHead | None = None,
) -> ChainReport:
    """Check a thread's step log against its hash chain.

    Args:
        checkpointer: The checkpointer the runs used (any backend; with
            encryption, opened with a key ring that reads the thread).
        thread_id: The thread.
        expected_head: A head kept elsewhere; the chain must still contain it.

    Returns:
        The report: ``ok``, and otherwise ``broken_at`` and ``reason``; steps
        written before the chain existed are counted in ``unchained_before``,
        not as tampering.
    """
    return await store_for(checkpointer).verify_chain(str(thread_id), expected_head=expected_head)


def verify_chain_sync(
    checkpointer: BaseCheckpointSaver[Any],
    thread_id: str,
    *,
    expected_head: ChainHead | None = None,
) -> ChainReport:
    """Sync twin of :func:`verify_chain` (not from the checkpointer's own event loop)."""
    return store_for(checkpointer).sync.verify_chain(str(thread_id), expected_head=expected_head)


async def chain_head(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> ChainHead | None:
    """The newest link of a thread's step-log chain, or ``None`` if no step is chained.

    Keep it with anything that outlives the thread (an audit summary): a log
    deleted whole, or cut short, no longer reaches it.
    """
    return await store_for(checkpointer).chain_head(str(thread_id))


def chain_head_sync(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> ChainHead | None:
    """Sync twin of :func:`chain_head`."""
    return store_for(checkpointer).sync.chain_head(str(thread_id))
