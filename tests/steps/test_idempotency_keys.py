"""Idempotency keys: one key per (tenant, thread, step, tool, arguments), never shared."""

from __future__ import annotations

import hashlib

from tether.steps._idempotency import idempotency_key

ARGS = "9f" * 32


def test_moving_a_separator_between_parts_gives_another_key() -> None:
    # Joined with "|", these were the same text and so the same key.
    pairs = [
        (("a|b", "c", "c|ns|task|s", "refund", ARGS), ("a", "b|c", "c|ns|task|s", "refund", ARGS)),
        (("", "t", "t||task|s", "x|y", ARGS), ("", "t", "t||task|s|x", "y", ARGS)),
        (("acme|t", "t", "t||s", "refund", ARGS), ("acme", "t|t", "t||s", "refund", ARGS)),
        (("", "t", "s", "refund", "h|x"), ("", "t", "s", "refund|h", "x")),
    ]
    for one, other in pairs:
        assert idempotency_key(*one) != idempotency_key(*other), (one, other)


def test_keys_of_unambiguous_parts_are_unchanged() -> None:
    """Keys handed to outside systems by earlier versions stay the same (no double effect
    for a call retried across an upgrade) wherever the old text was unambiguous."""
    parts = ("acme", "refund-1", "refund-1||4f2c|tool.issue_refund.call_1", "issue_refund", ARGS)
    old = "tether-" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:40]
    assert idempotency_key(*parts) == old
    assert idempotency_key(*parts) == idempotency_key(*parts)
