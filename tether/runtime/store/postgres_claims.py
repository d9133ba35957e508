"""The PostgreSQL claim statement: pending runs, or runs whose lease expired, taken at once.

SQL text only (no database driver), so that :mod:`tether.runtime.worker_leases`
can build its functions from it in an install without the ``postgres`` extra.
:mod:`tether.runtime.store.postgres_worker` runs it.
"""

from __future__ import annotations

__all__ = ["CLAIM_EXPIRED", "CLAIM_PENDING", "lease_claim_body"]

_CLAIM = """
WITH candidate AS (
    SELECT r.run_id, r.thread_id, {previous} AS previous_worker
      FROM tether_runs r
      JOIN tether_threads t ON t.thread_id = r.thread_id
     WHERE {where}
       AND r.graph_id = ANY(%(graphs)s)
     ORDER BY {order}
     LIMIT %(limit)s
       FOR UPDATE OF r, t SKIP LOCKED
),
claimed AS (
    UPDATE tether_runs r
       SET status = 'running', fence = r.fence + 1, attempt = r.attempt + 1,
           worker_id = %(worker)s,
           lease_expires_at = now() + make_interval(secs => %(lease)s),
           started_at = COALESCE(r.started_at, now()), updated_at = now(),
           last_seq = r.last_seq + 1
      FROM candidate c
     WHERE r.run_id = c.run_id
 RETURNING r.*, c.previous_worker{whole}
),
held AS (
    UPDATE tether_threads t
       SET active_run_id = c.run_id, status = 'busy', updated_at = now()
      FROM claimed c
     WHERE t.thread_id = c.thread_id
),
started AS (
    INSERT INTO tether_run_events (run_id, seq, kind, data, fence, worker_id)
    SELECT c.run_id, c.last_seq, 'run.started',
           jsonb_strip_nulls(jsonb_build_object(
               'attempt', c.attempt, 'resumes', c.resumes, 'worker_id', %(worker)s::text,
               'fence', c.fence, 'took_over_from', c.previous_worker))::text,
           c.fence, %(worker)s
      FROM claimed c
){tail}
"""
_SELECT_CLAIMED = """
SELECT c.*, pg_notify('tether_events', c.run_id) FROM claimed c ORDER BY c.seq"""
# A run-scoped worker role claims through a SECURITY DEFINER function
# (tether.runtime.worker_leases) whose body is this statement: it also stores
# each claim's lease-secret hash (the caller's p_hashes, one per slot) and
# returns the whole run row, which the role cannot read from the table.
_LEASE_CLAIMED = """,
numbered AS (
    SELECT c.*, row_number() OVER (ORDER BY c.seq) AS slot FROM claimed c
),
leased AS (
    INSERT INTO tether_leases (run_id, fence, secret_sha256)
    SELECT n.run_id, n.fence, p_hashes[n.slot] FROM numbered n
        ON CONFLICT (run_id) DO UPDATE
       SET fence = excluded.fence, secret_sha256 = excluded.secret_sha256
)
SELECT n.whole, n.previous_worker, n.slot FROM numbered n ORDER BY n.seq"""
_PENDING = {
    "previous": "NULL::text",
    "where": """r.status = 'pending'
       AND r.available_at <= now()
       AND t.active_run_id IS NULL
       AND NOT EXISTS (SELECT 1 FROM tether_runs h
                        WHERE h.thread_id = r.thread_id AND h.status = 'pending'
                          AND h.seq < r.seq)""",
    "order": "r.available_at, r.seq",
}
_EXPIRED = {
    "previous": "r.worker_id",
    "where": "r.status = 'running' AND r.lease_expires_at < now()",
    "order": "r.lease_expires_at",
}
CLAIM_PENDING = _CLAIM.format(**_PENDING, whole="", tail=_SELECT_CLAIMED)
CLAIM_EXPIRED = _CLAIM.format(**_EXPIRED, whole="", tail=_SELECT_CLAIMED)


def lease_claim_body(expired: bool) -> str:
    """The claim statement as a function body: parameters ``p_worker``, ``p_graphs``,
    ``p_limit``, ``p_lease`` and ``p_hashes``; returns (whole run row, previous worker, slot)."""
    which = _EXPIRED if expired else _PENDING
    sql = _CLAIM.format(**which, whole=", r AS whole", tail=_LEASE_CLAIMED)
    for name in ("graphs", "limit", "worker", "lease"):
        sql = sql.replace(f"%({name})s", f"p_{name}")
    return sql
