"""Run-scoped database credentials for workers on PostgreSQL (``tether workers grant``).

A worker connected as a role this module granted reads and writes checkpoint
rows (``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes``) and
tether's records and step log (``tether_records``, ``tether_steps``,
``tether_step_chain``) **only of the thread of a run it holds**, and of the
run store only that run and its thread:

* Each claim goes through a ``SECURITY DEFINER`` function that stores the
  SHA-256 of a fresh per-claim secret in ``tether_leases``, which the role
  cannot read (:mod:`tether.runtime.worker_leases`). The fence counter is no
  credential; ``run_id:fence:secret`` is.
* Every fenced write transaction starts with ``SELECT tether_assert_lease(run,
  fence, secret), set_config('tether.run_scope', 'run:fence:secret', true)``
  (one statement), and the savers queue the same setting before their reads
  inside a run (:func:`tether.checkpointing.scope_reads`), so the scope costs
  no round trip.
* Row-level security policies, restrictive and applying only to members of
  :data:`WORKER_GROUP`, admit a row when its ``thread_id`` is the thread of the
  run the scope names **and** that run is ``running`` with that fence and that
  secret right now (:data:`SCOPE_FUNCTION`, ``SECURITY DEFINER``, checked at
  every statement). On ``tether_runs`` and ``tether_threads`` they admit the
  held run's thread (updates: the held run, in granted columns only); on
  ``tether_run_events`` inserts of the held run at reserved seqs.
* Other roles see no change (a permissive policy admits every row to them);
  the tables' owner bypasses row-level security anyway.

The role gets no DDL right anywhere, nothing on crons or other tables (API
keys, for instance); ``docs/workers.md`` has the table of what it can do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tether._pg_setup import lock_for_setup
from tether.errors import ConfigurationError
from tether.runtime.worker_leases import LEASE_FUNCTIONS, LEASE_TABLE, SCOPE_PARTS

Conn = Any  # psycopg.AsyncConnection; psycopg is imported when a grant runs

__all__ = [
    "RUN_STORE_TABLES",
    "SCOPED_TABLES",
    "SCOPE_FUNCTION",
    "WORKER_GROUP",
    "WorkerGrant",
    "check_role_name",
    "grant_worker_role",
]

WORKER_GROUP = "tether_scoped_workers"
"""The role (no login) that carries the grants; each worker role is made a member."""
SCOPE_FUNCTION = "tether_scope_thread"
SCOPED_TABLES = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "tether_records",
    "tether_steps",
    "tether_step_chain",
)
RUN_STORE_TABLES = (
    "tether_assistants",
    "tether_assistant_versions",
    "tether_threads",
    "tether_runs",
    "tether_run_events",
    "tether_crons",
    "tether_cron_fires",
    "tether_workers",
)
_READ_ONLY_TABLES = ("tether_runtime_migrations", "checkpoint_migrations")
_ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('tether.workers.grant', 0))"
# The encrypted stores' HMAC secret: one record every worker reads (tether.store).
_SHARED_RECORD = "(kind = 'store_secret' AND thread_id = '__tether_store__')"

_FUNCTIONS = (
    f"""CREATE OR REPLACE FUNCTION {SCOPE_FUNCTION}() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
    scope text := pg_catalog.current_setting('tether.run_scope', true);
    parts text[];
    found text;
BEGIN
    IF scope IS NULL OR scope = '' THEN
        RAISE EXCEPTION 'tether: this transaction names no run, and a scoped worker role '
                        'reads and writes checkpoints and records only for a run it holds'
              USING ERRCODE = 'TL002',
                    HINT = 'start the transaction with tether_assert_lease(run_id, fence, '
                           'secret) or set tether.run_scope to run_id:fence:secret';
    END IF;
    parts := {{schema}}.tether_scope_parts(scope);
    IF parts IS NULL THEN
        -- The value is not echoed: it may hold a secret.
        RAISE EXCEPTION 'tether: malformed run scope, expected run_id:fence:secret '
                        '(a lease secret is minted by each claim of a scoped worker role)'
              USING ERRCODE = 'TL002';
    END IF;
    SELECT r.thread_id INTO found
      FROM {{schema}}.tether_runs r
      JOIN {{schema}}.tether_leases l ON l.run_id = r.run_id AND l.fence = r.fence
     WHERE r.run_id = parts[1] AND r.fence = parts[2]::bigint AND r.status = 'running'
       AND l.secret_sha256 = pg_catalog.sha256(pg_catalog.convert_to(parts[3], 'UTF8'));
    IF found IS NULL THEN
        RAISE EXCEPTION 'tether: run % no longer holds fence % (or the lease secret is wrong)',
              parts[1], parts[2]
              USING ERRCODE = 'TL001';
    END IF;
    RETURN found;
END $$""",
    """CREATE OR REPLACE FUNCTION tether_scope_admits(p_thread_id text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
    scoped text := {schema}.tether_scope_thread();
BEGIN
    IF p_thread_id IS DISTINCT FROM scoped THEN
        RAISE EXCEPTION 'tether: thread % is outside this transaction''s run scope '
                        '(thread %)', p_thread_id, scoped
              USING ERRCODE = '42501';
    END IF;
    RETURN true;
END $$""",
    """CREATE OR REPLACE FUNCTION tether_scope_run() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
BEGIN
    PERFORM {schema}.tether_scope_thread();  -- verifies the lease, or raises
    RETURN ({schema}.tether_scope_parts(
        pg_catalog.current_setting('tether.run_scope')))[1];
END $$""",
    # An event of the scoped run at a seq the run row reserved (last_seq). The
    # lease's fence and secret must match, but the run need not be running any
    # more: a finish records its event after the run row ended, in the same
    # transaction. Once that commits every reserved seq is taken.
    """CREATE OR REPLACE FUNCTION tether_scope_admits_event(p_run_id text, p_seq bigint)
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
    scope text := pg_catalog.current_setting('tether.run_scope', true);
    parts text[] := {schema}.tether_scope_parts(scope);
BEGIN
    IF parts IS NULL OR parts[1] IS DISTINCT FROM p_run_id OR NOT EXISTS (
        SELECT 1 FROM {schema}.tether_runs r
          JOIN {schema}.tether_leases l ON l.run_id = r.run_id AND l.fence = r.fence
         WHERE r.run_id = p_run_id AND r.fence = parts[2]::bigint AND p_seq <= r.last_seq
           AND l.secret_sha256 = pg_catalog.sha256(pg_catalog.convert_to(parts[3], 'UTF8')))
    THEN
        RAISE EXCEPTION 'tether: an event of run % is outside this transaction''s run scope',
              p_run_id
              USING ERRCODE = '42501';
    END IF;
    RETURN true;
END $$""",
)
_SCOPE_FUNCTIONS = (
    "tether_scope_thread()",
    "tether_scope_admits(text)",
    "tether_scope_run()",
    "tether_scope_admits_event(text, bigint)",
)
# What the role may change in the rows the policies show it (a finish, a
# release, an event's seq): never a run's identity, thread or fence.
_RUN_COLUMNS = (
    "status",
    "worker_id",
    "lease_expires_at",
    "waiting_on",
    "error",
    "ended_reason",
    "ended_at",
    "input",
    "input_kind",
    "last_seq",
    "updated_at",
    "available_at",
    "attempt",
)
_THREAD_COLUMNS = (
    "active_run_id",
    "status",
    "state_values",
    "interrupts",
    "error",
    "updated_at",
    "state_updated_at",
)


@dataclass(frozen=True)
class WorkerGrant:
    """What :func:`grant_worker_role` did."""

    role: str
    created: bool
    """``False`` when the role existed (its grants and the policies were renewed)."""
    database: str


def check_role_name(role: str) -> str:
    """``role`` if it can name a worker role, else :class:`ConfigurationError` saying why."""
    if not _ROLE_NAME.fullmatch(role):
        raise ConfigurationError(
            f"bad worker role name {role!r}: use 1 to 63 lowercase letters, digits and "
            "underscores, not starting with a digit"
        )
    if role.startswith("pg_") or role in {"public", "postgres", WORKER_GROUP}:
        raise ConfigurationError(
            f"bad worker role name {role!r}: it is reserved (pg_*, public, postgres, "
            f"{WORKER_GROUP})"
        )
    return role


async def grant_worker_role(url: str, role: str, *, password: str | None = None) -> WorkerGrant:
    """Make ``role`` a run-scoped worker role of the PostgreSQL database at ``url``.

    Connects with ``url``'s (administrator's) credentials, brings the run
    store, the checkpoints and the records to the latest schema, then creates
    ``role`` (``LOGIN``) unless it exists, makes it a member of
    :data:`WORKER_GROUP`, grants what a worker needs and installs the
    row-level policies. Idempotent: a second call renews the same grants.

    Raises:
        ConfigurationError: a bad role name, or a role that would bypass the
            policies (superuser, ``BYPASSRLS``, the administrator itself, or
            the tables' owner).
    """
    import psycopg

    from tether.checkpointing import open_checkpointer
    from tether.runtime.store import open_run_store
    from tether.store import store_for

    check_role_name(role)
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigurationError(
            f"tether workers grant needs a postgresql:// URL, not {url.split(':', 1)[0]}://; "
            "SQLite is a single user's file, and Redis would need ACLs"
        )
    async with open_run_store(url) as store:
        await store.setup()
    async with open_checkpointer(url) as saver:
        await store_for(saver).list("tether.setup")  # the first call creates the tables
    conninfo = url.replace("postgres://", "postgresql://", 1)
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        async with conn.transaction():
            await lock_for_setup(conn.execute, _LOCK)
            created = await _ensure_role(conn, role, password)
            await _check_role(conn, role)
            await _install(conn, role)
        database = str(conn.info.dbname)
    return WorkerGrant(role, created, database)


async def _ensure_role(conn: Conn, role: str, password: str | None) -> bool:
    """Create the group and ``role`` as needed; ``True`` if ``role`` was created."""
    import psycopg
    from psycopg import sql

    created = False
    for name, login in ((WORKER_GROUP, False), (role, True)):
        cur = await conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
        if await cur.fetchone() is None:
            # Roles are shared by the cluster's databases: another database's grant
            # may create it at the same moment; a savepoint absorbs that race.
            try:
                async with conn.transaction():
                    await conn.execute(
                        sql.SQL("CREATE ROLE {} " + ("LOGIN" if login else "NOLOGIN")).format(
                            sql.Identifier(name)
                        )
                    )
                created = created or name == role
            except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
                pass
    if password is not None:
        await conn.execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), sql.Literal(password))
        )
    return created


async def _check_role(conn: Conn, role: str) -> None:
    """Refuse a role the policies would not restrict."""
    cur = await conn.execute(
        """SELECT r.rolsuper, r.rolbypassrls, r.rolname = current_user,
                  EXISTS (SELECT 1 FROM pg_tables t
                           WHERE t.tablename = ANY(%s) AND t.schemaname = current_schema()
                             AND pg_has_role(r.oid, (SELECT oid FROM pg_roles
                                                      WHERE rolname = t.tableowner), 'USAGE'))
             FROM pg_roles r WHERE r.rolname = %s""",
        (list(SCOPED_TABLES), role),
    )
    row = await cur.fetchone()
    assert row is not None
    superuser, bypass, is_admin, owner = row
    why = (
        "is a superuser"
        if superuser
        else "has BYPASSRLS"
        if bypass
        else "is the role this command connects as"
        if is_admin
        else "owns (or acts as the owner of) the checkpoint tables"
        if owner
        else None
    )
    if why is not None:
        raise ConfigurationError(
            f"role {role!r} {why}: row-level security would not restrict it; "
            "choose a role of its own for workers"
        )


async def _install(conn: Conn, role: str) -> None:
    from psycopg import sql

    group = sql.Identifier(WORKER_GROUP)
    # No SET search_path on the per-statement functions (it costs a configuration
    # save and restore at every call): every name in their bodies is
    # schema-qualified instead, so objects a caller creates elsewhere (pg_temp)
    # cannot stand in for them. The claim and heartbeat functions set it.
    schema = sql.Identifier(await _schema(conn))
    tables = sql.SQL(", ").join(map(sql.Identifier, RUN_STORE_TABLES + SCOPED_TABLES))
    functions = [(sig, create) for sig, create in LEASE_FUNCTIONS]
    statements: list[Any] = [sql.SQL(LEASE_TABLE).format(schema=schema), sql.SQL(SCOPE_PARTS)]
    statements += [sql.SQL(f).format(schema=schema) for f in _FUNCTIONS]
    statements += [sql.SQL(create).format(schema=schema) for _, create in functions]
    for signature in _SCOPE_FUNCTIONS + tuple(sig for sig, _ in functions):
        statements += [
            sql.SQL(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC"),
            sql.SQL(f"GRANT EXECUTE ON FUNCTION {signature} TO {{}}").format(group),
        ]
    statements += [
        sql.SQL("REVOKE ALL ON tether_leases FROM PUBLIC"),
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(str(conn.info.dbname)), group
        ),
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, group),
        # From scratch at every grant: an older grant gave the whole run store.
        sql.SQL("REVOKE ALL ON {} FROM {}").format(tables, group),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, SCOPED_TABLES)), group
        ),
        # The run store: rows of the held run's thread only (policies below);
        # claims and heartbeats go through the lease functions.
        sql.SQL("GRANT SELECT ON tether_runs, tether_threads TO {}").format(group),
        sql.SQL("GRANT UPDATE ({}) ON tether_runs TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, _RUN_COLUMNS)), group
        ),
        sql.SQL("GRANT UPDATE ({}) ON tether_threads TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, _THREAD_COLUMNS)), group
        ),
        sql.SQL("GRANT INSERT ON tether_run_events TO {}").format(group),
        # A worker registers its graphs' system assistants and itself.
        sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(
            sql.SQL("tether_assistants, tether_assistant_versions"), group
        ),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON tether_workers TO {}").format(group),
        sql.SQL("GRANT SELECT ON {} TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, _READ_ONLY_TABLES)), group
        ),
        sql.SQL("GRANT USAGE ON SEQUENCE tether_records_seq_seq TO {}").format(group),
        sql.SQL("GRANT {} TO {}").format(group, sql.Identifier(role)),
    ]
    for table in SCOPED_TABLES:
        statements += _policies(table, _scoped_table_policies(table))
    for table, policies in _RUN_STORE_POLICIES.items():
        statements += _policies(table, policies)
    for statement in statements:
        await conn.execute(statement)


_IN_SCOPE = f"thread_id = (SELECT {SCOPE_FUNCTION}())"
Policy = tuple[str, str, str | None, str | None]
"""(name, command, USING, WITH CHECK) of a restrictive policy for the group."""

# Rows of the held run's thread: the run row itself, the thread's other runs
# (a finish looks for a pending one), the thread row. Updates: the held run and
# its thread only, in the granted columns; no insert, no delete. Events: only
# inserts, of the held run, at seqs its row reserved.
_RUN_STORE_POLICIES: dict[str, tuple[Policy, ...]] = {
    "tether_runs": (
        ("tether_scope_select", "SELECT", _IN_SCOPE, None),
        ("tether_scope_update", "UPDATE", "run_id = (SELECT tether_scope_run())", "true"),
    ),
    "tether_threads": (
        ("tether_scope_select", "SELECT", _IN_SCOPE, None),
        ("tether_scope_update", "UPDATE", _IN_SCOPE, "true"),
    ),
    "tether_run_events": (
        ("tether_scope_select", "SELECT", "false", None),
        ("tether_scope_insert", "INSERT", None, "tether_scope_admits_event(run_id, seq)"),
    ),
}


def _scoped_table_policies(table: str) -> tuple[Policy, ...]:
    readable = f"{_SHARED_RECORD} OR {_IN_SCOPE}" if table == "tether_records" else _IN_SCOPE
    admits = "tether_scope_admits(thread_id)"
    return (
        ("tether_scope_select", "SELECT", readable, None),
        ("tether_scope_insert", "INSERT", None, admits),
        ("tether_scope_update", "UPDATE", _IN_SCOPE, admits),
        ("tether_scope_delete", "DELETE", _IN_SCOPE, None),
    )


def _policies(table: str, restrictive: tuple[Policy, ...]) -> list[Any]:
    """Row-level security on ``table``: every row for others, ``restrictive`` for workers."""
    from psycopg import sql

    name = sql.Identifier(table)
    group = sql.Identifier(WORKER_GROUP)
    out: list[Any] = [sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(name)]
    policies = (("tether_everyone", "ALL", "true", "true"), *restrictive)
    for policy, command, using, check in policies:
        out.append(sql.SQL("DROP POLICY IF EXISTS {} ON {}").format(sql.Identifier(policy), name))
        kind = "PERMISSIVE" if policy == "tether_everyone" else "RESTRICTIVE"
        text = "CREATE POLICY {} ON {} AS " + kind + " FOR " + command + " TO {}"
        if using is not None:
            text += f" USING ({using})"
        if check is not None:
            text += f" WITH CHECK ({check})"
        to = sql.SQL("PUBLIC") if policy == "tether_everyone" else group
        out.append(sql.SQL(text).format(sql.Identifier(policy), name, to))
    return out


async def _schema(conn: Conn) -> str:
    cur = await conn.execute("SELECT current_schema()")
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])
