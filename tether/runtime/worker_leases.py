"""Lease secrets for run-scoped worker roles (PostgreSQL, ``tether workers grant``).

A run's fence counter is no secret: anyone who can list runs learns it. So a
worker connected as a scoped role claims through a ``SECURITY DEFINER``
function that also stores, per claim, the SHA-256 of a fresh 32-byte secret
the worker drew (:func:`new_secret`); the secret itself never leaves the
worker's memory but inside its own statements. The hashes live in
``tether_leases``, a table the role has no privilege on. Everything the role
does to a run or its thread then names ``run_id:fence:secret``:

* ``tether_assert_lease(run, fence, secret)``: the fence check of a write
  transaction (``FOR SHARE`` on the run row, like ``tether_assert_fence``);
* ``tether.run_scope`` = ``run_id:fence:secret``, which the row-level policies
  (:mod:`tether.runtime.worker_role`) verify at every statement;
* ``tether_lease_heartbeat`` / ``tether_lease_valid``: heartbeats and
  verifications of the runs whose secrets the worker presents.

The unrestricted roles never call these: their claims mint no secret and
their statements are unchanged.
"""

from __future__ import annotations

from tether.runtime.store.postgres_claims import lease_claim_body

__all__ = ["LEASE_FUNCTIONS", "LEASE_TABLE", "SCOPE_PARTS"]

# run_id:fence:secret -> {run_id, fence, secret}, NULL when malformed (the secret
# is 64 lowercase hex digits, the fence 1 to 18 digits). String functions, not a
# capturing regular expression: PostgreSQL's regex engine takes about a
# millisecond to dissect the captures of such a pattern, and this runs at every
# statement of a scoped role. An IMMUTABLE SQL function: inlined where it is called.
SCOPE_PARTS = """CREATE OR REPLACE FUNCTION tether_scope_parts(p_scope text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE
    WHEN pg_catalog.substr(p_scope, pg_catalog.length(p_scope) - 64, 1) = ':'
     AND pg_catalog.length(pg_catalog.translate(pg_catalog.right(p_scope, 64),
                                                '0123456789abcdef', '')) = 0
     AND pg_catalog.length(f.fence) BETWEEN 1 AND 18
     AND pg_catalog.length(pg_catalog.translate(f.fence, '0123456789', '')) = 0
     AND pg_catalog.length(p_scope) - 66 - pg_catalog.length(f.fence) > 0
    THEN ARRAY[pg_catalog.left(p_scope, -66 - pg_catalog.length(f.fence)), f.fence,
               pg_catalog.right(p_scope, 64)]
END
  FROM (SELECT pg_catalog.split_part(pg_catalog.left(p_scope, -65), ':', -1) AS fence) f
$$"""

LEASE_TABLE = """CREATE TABLE IF NOT EXISTS {schema}.tether_leases (
    run_id        TEXT PRIMARY KEY REFERENCES {schema}.tether_runs ON DELETE CASCADE,
    fence         BIGINT NOT NULL,
    secret_sha256 BYTEA NOT NULL
)"""

# A live lease: the run is running with this fence, and the fence's claim stored
# the secret's hash. Qualified names (no SET search_path: these run per statement).
_LIVE = """{schema}.tether_runs r
      JOIN {schema}.tether_leases l ON l.run_id = r.run_id AND l.fence = r.fence
     WHERE r.run_id = p_run AND r.fence = p_fence AND r.status = 'running'
       AND l.secret_sha256 = pg_catalog.sha256(pg_catalog.convert_to(p_secret, 'UTF8'))"""

_CLAIM = """CREATE OR REPLACE FUNCTION tether_claim_{which}_leased(
    p_worker text, p_graphs text[], p_limit integer, p_lease double precision, p_hashes bytea[])
RETURNS TABLE (run {schema}.tether_runs, previous_worker text, slot bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
{body}
$$"""

_CLAIM_ARGS = "(text, text[], integer, double precision, bytea[])"


def _claim(which: str) -> tuple[str, str]:
    body = lease_claim_body(which == "expired").replace("{", "{{").replace("}", "}}")
    create = _CLAIM.format(which=which, schema="{schema}", body=body)
    return f"tether_claim_{which}_leased{_CLAIM_ARGS}", create


LEASE_FUNCTIONS: tuple[tuple[str, str], ...] = (
    _claim("pending"),
    _claim("expired"),
    (
        "tether_assert_lease(text, bigint, text)",
        f"""CREATE OR REPLACE FUNCTION tether_assert_lease(
    p_run text, p_fence bigint, p_secret text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM 1 FROM {_LIVE}
       FOR SHARE OF r;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tether: run % no longer holds fence % (or the lease secret is wrong)',
              p_run, p_fence
              USING ERRCODE = 'TL001';
    END IF;
END $$""",
    ),
    (
        "tether_lease_valid(text, bigint, text)",
        f"""CREATE OR REPLACE FUNCTION tether_lease_valid(
    p_run text, p_fence bigint, p_secret text) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT EXISTS (SELECT 1 FROM {_LIVE})
$$""",
    ),
    (
        "tether_lease_heartbeat(text, double precision, text[], text[])",
        """CREATE OR REPLACE FUNCTION tether_lease_heartbeat(
    p_worker text, p_lease double precision, p_runs text[], p_secrets text[])
RETURNS TABLE (run_id text, fence bigint, cancel_action text, cancel_reason text,
               deadline_at timestamptz)
LANGUAGE sql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
UPDATE tether_runs r
   SET lease_expires_at = now() + make_interval(secs => p_lease)
  FROM tether_leases l, unnest(p_runs, p_secrets) AS h(run_id, secret)
 WHERE r.worker_id = p_worker AND r.status = 'running'
   AND h.run_id = r.run_id AND l.run_id = r.run_id AND l.fence = r.fence
   AND l.secret_sha256 = sha256(convert_to(h.secret, 'UTF8'))
RETURNING r.run_id, r.fence, r.cancel_action, r.cancel_reason, r.deadline_at
$$""",
    ),
)
"""(signature, ``CREATE OR REPLACE`` statement with ``{schema}`` to fill) of each function."""
