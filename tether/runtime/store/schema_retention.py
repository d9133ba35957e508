"""Version 2 of the run store's schema (both dialects): retention's index and audit tables.

- ``tether_threads_activity`` orders every tenant's threads by their last
  activity (``updated_at``), so the retention sweep pages through the old ones
  with a range scan instead of reading every thread or checkpoint.
- ``tether_audit_summaries`` holds one compact summary per deleted thread
  (hashes and counts, never values), under its own retention
  (``keep_until``). Its ``state`` makes a deletion resumable: ``pending``
  (written, nothing deleted yet), ``deleting`` (the thread's rows are gone in
  the same transaction that set it; its checkpoints may remain) and ``done``.
- ``tether_erasure_receipts`` and ``tether_erasure_receipt_threads`` keep each
  erasure's receipt, found again by the SHA-256 of an erased thread's id.
- ``tether_retention_marks`` records the activity a thread had when it was
  last pruned to its newest checkpoint, so a later sweep skips it until it is
  active again (the row goes with the thread).
"""

from __future__ import annotations

__all__ = ["POSTGRES_V2", "SQLITE_V2"]


def _tables(time: str) -> tuple[str, ...]:
    return (
        f"""\
CREATE TABLE tether_audit_summaries (
    summary_id  TEXT PRIMARY KEY,      -- sha256(thread id, its creation time)
    thread_id   TEXT NOT NULL,
    tenant_id   TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'deleting', 'done')),
    written_at  {time} NOT NULL,
    keep_until  {time},                -- NULL: kept until deleted by hand
    summary     TEXT NOT NULL          -- canonical JSON, see tether.retention.summary
)""",
        "CREATE INDEX tether_audit_summaries_thread ON tether_audit_summaries (thread_id)",
        "CREATE INDEX tether_audit_summaries_state ON tether_audit_summaries (state, written_at)",
        """\
CREATE INDEX tether_audit_summaries_keep ON tether_audit_summaries (keep_until)
    WHERE keep_until IS NOT NULL""",
        f"""\
CREATE TABLE tether_erasure_receipts (
    receipt_id  TEXT PRIMARY KEY,
    written_at  {time} NOT NULL,
    keep_until  {time},
    receipt     TEXT NOT NULL          -- canonical JSON, see tether.retention.receipt
)""",
        """\
CREATE TABLE tether_erasure_receipt_threads (
    receipt_id    TEXT NOT NULL REFERENCES tether_erasure_receipts ON DELETE CASCADE,
    thread_sha256 TEXT NOT NULL,
    PRIMARY KEY (thread_sha256, receipt_id)
)""",
        f"""\
CREATE TABLE tether_retention_marks (
    thread_id   TEXT PRIMARY KEY REFERENCES tether_threads ON DELETE CASCADE,
    activity_at {time} NOT NULL        -- the thread's updated_at when it was pruned
)""",
    )


_ACTIVITY = "CREATE INDEX tether_threads_activity ON tether_threads (updated_at, thread_id)"

POSTGRES_V2: tuple[str, ...] = (_ACTIVITY, *_tables("TIMESTAMPTZ"))
SQLITE_V2: tuple[str, ...] = (_ACTIVITY, *_tables("REAL"))
