"""FakePaymentsProvider: idempotency keys honoured, every attempt and effect counted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tether.graphs import FakeOrder, FakePaymentsError, FakePaymentsProvider, PaymentCounts

ORDER = FakeOrder("A-1001", "ada@example.com", "teapot", 4200)


@pytest.fixture
def provider(tmp_path: Path) -> FakePaymentsProvider:
    fake = FakePaymentsProvider(tmp_path / "payments.db")
    fake.add_order(ORDER)
    return fake


def test_same_key_same_refund_and_no_second_refund(provider: FakePaymentsProvider) -> None:
    first = provider.refund("A-1001", 4200, idempotency_key="k1")
    again = provider.refund("A-1001", 4200, idempotency_key="k1")
    assert again == first
    assert provider.counts() == PaymentCounts(
        refund_attempts=2, refunds=1, email_attempts=0, emails=0
    )
    other = provider.refund("A-1001", 100, idempotency_key="k2")
    assert other.refund_id != first.refund_id
    assert provider.counts().refunds == 2


def test_without_a_key_every_call_refunds(provider: FakePaymentsProvider) -> None:
    a = provider.refund("A-1001", 1000)
    b = provider.refund("A-1001", 1000)
    assert a.refund_id != b.refund_id
    assert provider.counts().refunds == 2


def test_state_survives_reopening(tmp_path: Path, provider: FakePaymentsProvider) -> None:
    refund = provider.refund("A-1001", 4200, idempotency_key="k1")
    reopened = FakePaymentsProvider(tmp_path / "payments.db")
    assert reopened.refund("A-1001", 4200, idempotency_key="k1") == refund
    assert reopened.get_order("A-1001") == ORDER
    assert reopened.counts().refunds == 1


def test_refused_refunds_count_as_attempts_only(provider: FakePaymentsProvider) -> None:
    with pytest.raises(FakePaymentsError, match="unknown order 'Z-9'"):
        provider.refund("Z-9", 10, idempotency_key="a")
    with pytest.raises(FakePaymentsError, match="at most the order total of 4200"):
        provider.refund("A-1001", 5000, idempotency_key="b")
    with pytest.raises(FakePaymentsError, match="must be positive"):
        provider.refund("A-1001", 0)
    assert provider.counts() == PaymentCounts(
        refund_attempts=3, refunds=0, email_attempts=0, emails=0
    )


def test_unknown_order_lookup(provider: FakePaymentsProvider) -> None:
    with pytest.raises(FakePaymentsError, match="unknown order 'nope'"):
        provider.get_order("nope")


def test_emails_have_no_idempotency_and_can_be_found(provider: FakePaymentsProvider) -> None:
    assert provider.find_email("ada@example.com", "Hi", "body") is None
    first = provider.send_email("ada@example.com", "Hi", "body")
    second = provider.send_email("ada@example.com", "Hi", "body")
    assert first != second
    assert provider.find_email("ada@example.com", "Hi", "body") == first
    assert provider.find_email("ada@example.com", "Hi", "other body") is None
    assert provider.counts() == PaymentCounts(
        refund_attempts=0, refunds=0, email_attempts=2, emails=2
    )


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FakePaymentsError, match="does not exist; create it first"):
        FakePaymentsProvider(tmp_path / "absent" / "payments.db")


def test_each_operation_is_one_transaction(provider: FakePaymentsProvider) -> None:
    # A refund is either fully there (row with its id) or absent: no half-written rows.
    provider.refund("A-1001", 4200, idempotency_key="k1")
    with sqlite3.connect(provider.path) as db:
        assert db.execute("SELECT COUNT(*) FROM refunds WHERE refund_id IS NULL").fetchone() == (0,)
