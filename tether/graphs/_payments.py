"""``FakePaymentsProvider``: a local, SQLite-backed fake of a payments service and a mailer.

It stands in for the outside world of the refund agent. It behaves like a real
provider where durability is concerned:

* ``refund(...)`` honours idempotency keys: a key seen before returns the
  refund it created the first time and moves no money again;
* every attempt and every refund actually created is counted, so a test can
  prove that a crash and a resume did not pay twice;
* ``reverse_refund(...)`` takes a refund back, deduplicated on its key too;
* ``send_email(...)`` takes no key: sending twice sends two emails. The outbox
  can be searched (``find_email``), which is what a reconcile hook uses to read
  the world back after a crash.

Everything lives in one SQLite file; each operation is one transaction, so a
process killed at any moment leaves either the whole effect or none of it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tether.errors import TetherError

__all__ = ["FakeOrder", "FakePaymentsError", "FakePaymentsProvider", "FakeRefund", "PaymentCounts"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    order_id TEXT PRIMARY KEY, customer_email TEXT NOT NULL,
    item TEXT NOT NULL, amount_cents INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, idempotency_key TEXT);
CREATE TABLE IF NOT EXISTS refunds (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, refund_id TEXT UNIQUE, order_id TEXT NOT NULL,
    amount_cents INTEGER NOT NULL, idempotency_key TEXT UNIQUE);
CREATE TABLE IF NOT EXISTS reversals (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, reversal_id TEXT UNIQUE, refund_id TEXT NOT NULL,
    idempotency_key TEXT UNIQUE);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT UNIQUE, recipient TEXT NOT NULL,
    subject TEXT NOT NULL, body TEXT NOT NULL);
"""


def _insert_numbered(
    db: sqlite3.Connection, table: str, id_column: str, prefix: str, row: dict[str, object]
) -> str:
    """Insert ``row`` and give it the id ``<prefix>_<seq>`` (deterministic per database)."""
    columns = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    cursor = db.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(row.values()))
    new_id = f"{prefix}_{cursor.lastrowid:06d}"
    db.execute(f"UPDATE {table} SET {id_column} = ? WHERE seq = ?", (new_id, cursor.lastrowid))
    return new_id


class FakePaymentsError(TetherError):
    """The fake provider refused a request (unknown order, refund above the order total)."""


@dataclass(frozen=True)
class FakeOrder:
    """An order the fake shop knows."""

    order_id: str
    customer_email: str
    item: str
    amount_cents: int


@dataclass(frozen=True)
class FakeRefund:
    """A refund the fake provider created."""

    refund_id: str
    order_id: str
    amount_cents: int


@dataclass(frozen=True)
class PaymentCounts:
    """What happened in the fake world: requests made and effects created."""

    refund_attempts: int
    refunds: int
    email_attempts: int
    emails: int
    reversals: int = 0


class FakePaymentsProvider:
    """A fake payments provider and outbox in the SQLite file ``path``.

    Args:
        path: The database file; created with its tables if missing.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise FakePaymentsError(
                f"directory {str(self.path.parent)!r} for the fake payments database does not "
                "exist; create it first"
            )
        # executescript manages its own transaction, so it runs outside _transaction().
        db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            db.executescript(_SCHEMA)
        finally:
            db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    def _count_attempt(self, kind: str, idempotency_key: str | None) -> None:
        # Its own transaction, so a refused request still counts as an attempt.
        with self._transaction() as db:
            db.execute(
                "INSERT INTO attempts (kind, idempotency_key) VALUES (?, ?)",
                (kind, idempotency_key),
            )

    def add_order(self, order: FakeOrder) -> None:
        """Create or replace an order (test and demo setup)."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO orders VALUES (?, ?, ?, ?)",
                (order.order_id, order.customer_email, order.item, order.amount_cents),
            )

    def get_order(self, order_id: str) -> FakeOrder:
        """The order ``order_id``.

        Raises:
            FakePaymentsError: No such order.
        """
        with self._transaction() as db:
            row = db.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
        if row is None:
            raise FakePaymentsError(f"unknown order {order_id!r}")
        return FakeOrder(*row)

    def refund(
        self, order_id: str, amount_cents: int, *, idempotency_key: str | None = None
    ) -> FakeRefund:
        """Refund ``amount_cents`` on ``order_id``; a repeated key returns the first refund.

        Raises:
            FakePaymentsError: Unknown order, or an amount that is not positive
                or exceeds the order total.
        """
        self._count_attempt("refund", idempotency_key)
        with self._transaction() as db:
            if idempotency_key is not None:
                row = db.execute(
                    "SELECT refund_id, order_id, amount_cents FROM refunds "
                    "WHERE idempotency_key = ?",
                    (idempotency_key,),
                ).fetchone()
                if row is not None:
                    return FakeRefund(*row)
            order = db.execute(
                "SELECT amount_cents FROM orders WHERE order_id = ?", (order_id,)
            ).fetchone()
            if order is None:
                raise FakePaymentsError(f"cannot refund unknown order {order_id!r}")
            if not 0 < amount_cents <= order[0]:
                raise FakePaymentsError(
                    f"refund of {amount_cents} cents on order {order_id!r} must be positive "
                    f"and at most the order total of {order[0]} cents"
                )
            refund_id = _insert_numbered(
                db,
                "refunds",
                "refund_id",
                "re",
                {
                    "order_id": order_id,
                    "amount_cents": amount_cents,
                    "idempotency_key": idempotency_key,
                },
            )
        return FakeRefund(refund_id, order_id, amount_cents)

    def reverse_refund(self, refund_id: str, *, idempotency_key: str) -> str:
        """Take back refund ``refund_id``; a repeated key returns the first reversal's id.

        Raises:
            FakePaymentsError: No such refund.
        """
        self._count_attempt("reversal", idempotency_key)
        with self._transaction() as db:
            row = db.execute(
                "SELECT reversal_id FROM reversals WHERE idempotency_key = ?", (idempotency_key,)
            ).fetchone()
            if row is not None:
                return str(row[0])
            if (
                db.execute("SELECT 1 FROM refunds WHERE refund_id = ?", (refund_id,)).fetchone()
                is None
            ):
                raise FakePaymentsError(f"cannot reverse unknown refund {refund_id!r}")
            return _insert_numbered(
                db,
                "reversals",
                "reversal_id",
                "rv",
                {"refund_id": refund_id, "idempotency_key": idempotency_key},
            )

    def send_email(self, to: str, subject: str, body: str) -> str:
        """Put an email in the outbox (no idempotency: two calls send two emails).

        Returns:
            The message id.
        """
        self._count_attempt("email", None)
        with self._transaction() as db:
            return _insert_numbered(
                db,
                "outbox",
                "message_id",
                "msg",
                {"recipient": to, "subject": subject, "body": body},
            )

    def find_email(self, to: str, subject: str, body: str) -> str | None:
        """The id of the first outbox message with exactly these fields, if any."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT message_id FROM outbox WHERE recipient = ? AND subject = ? AND body = ? "
                "ORDER BY seq LIMIT 1",
                (to, subject, body),
            ).fetchone()
        return None if row is None else str(row[0])

    def counts(self) -> PaymentCounts:
        """Attempts and effects so far."""
        with self._transaction() as db:

            def count(sql: str) -> int:
                return int(db.execute(sql).fetchone()[0])

            return PaymentCounts(
                refund_attempts=count("SELECT COUNT(*) FROM attempts WHERE kind = 'refund'"),
                refunds=count("SELECT COUNT(*) FROM refunds"),
                email_attempts=count("SELECT COUNT(*) FROM attempts WHERE kind = 'email'"),
                emails=count("SELECT COUNT(*) FROM outbox"),
                reversals=count("SELECT COUNT(*) FROM reversals"),
            )
