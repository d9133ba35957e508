"""Run-scoped database credentials for workers on PostgreSQL (``tether workers grant``).

A worker connected as a role this module granted reads and writes checkpoint
rows (``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes``) and
tether's records and step log (``tether_records``, ``tether_steps``,
``tether_step_chain``) **only of
the thread of a run whose lease the current transaction named**:

* Every fenced write transaction starts with ``SELECT tether_assert_fence(run,
  token), set_config('tether.run_scope', 'run:token', true)`` (one statement,
  the one it always sent), and the savers queue the same setting before their
  reads inside a run (:func:`tether.checkpointing.scope_reads`), so the scope
  costs no round trip.
* Row-level security policies on those tables, restrictive and applying only
  to members of :data:`WORKER_GROUP`, admit a row when its ``thread_id`` is the
  thread of the run the scope names **and** that run is ``running`` with that
  fence right now (:data:`SCOPE_FUNCTION`, ``SECURITY DEFINER``, checked at
  every statement). The setting itself is therefore no credential: setting it
  to anything but a live lease opens nothing, and a lease dies with its claim.
* Other roles see no change (a permissive policy admits every row to them);
  the tables' owner bypasses row-level security anyway.

The run store's own tables (runs, threads, events, workers, crons) stay
readable and writable by the role, as a worker's claims, heartbeats, events
and finishes need; it gets no DDL right anywhere and nothing on other tables
(API keys, for instance).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tether.errors import ConfigurationError

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
                    HINT = 'start the transaction with tether_assert_fence(run_id, fence) '
                           'or set tether.run_scope to run_id:fence';
    END IF;
    parts := pg_catalog.regexp_match(scope, '^(.+):(-?[0-9]{{{{1,18}}}})$');
    IF parts IS NULL THEN
        RAISE EXCEPTION 'tether: malformed run scope %, expected run_id:fence', scope
              USING ERRCODE = 'TL002';
    END IF;
    SELECT r.thread_id INTO found FROM {{schema}}.tether_runs r
     WHERE r.run_id = parts[1] AND r.fence = parts[2]::bigint AND r.status = 'running';
    IF found IS NULL THEN
        RAISE EXCEPTION 'tether: run % no longer holds fence %', parts[1], parts[2]
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
            await conn.execute(_LOCK)
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
    # No SET search_path (it costs a configuration save and restore at every
    # call): every name in the bodies is schema-qualified instead, so objects a
    # caller creates elsewhere (pg_temp) cannot stand in for them.
    schema = sql.Identifier(await _schema(conn))
    statements: list[Any] = [sql.SQL(f).format(schema=schema) for f in _FUNCTIONS]
    statements += [
        sql.SQL("REVOKE ALL ON FUNCTION {}() FROM PUBLIC").format(sql.Identifier(SCOPE_FUNCTION)),
        sql.SQL("REVOKE ALL ON FUNCTION tether_scope_admits(text) FROM PUBLIC"),
        sql.SQL("GRANT EXECUTE ON FUNCTION {}() TO {}").format(
            sql.Identifier(SCOPE_FUNCTION), group
        ),
        sql.SQL("GRANT EXECUTE ON FUNCTION tether_scope_admits(text) TO {}").format(group),
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(str(conn.info.dbname)), group
        ),
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.Identifier(await _schema(conn)), group
        ),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, RUN_STORE_TABLES + SCOPED_TABLES)), group
        ),
        sql.SQL("GRANT SELECT ON {} TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, _READ_ONLY_TABLES)), group
        ),
        sql.SQL("GRANT USAGE ON SEQUENCE tether_records_seq_seq TO {}").format(group),
        sql.SQL("GRANT {} TO {}").format(group, sql.Identifier(role)),
    ]
    for table in SCOPED_TABLES:
        statements += _policies(table)
    for statement in statements:
        await conn.execute(statement)


def _policies(table: str) -> list[Any]:
    """Row-level security on ``table``: every row for others, the scope's thread for workers."""
    from psycopg import sql

    name = sql.Identifier(table)
    group = sql.Identifier(WORKER_GROUP)
    in_scope = f"thread_id = (SELECT {SCOPE_FUNCTION}())"
    readable = f"{_SHARED_RECORD} OR {in_scope}" if table == "tether_records" else in_scope
    admits = "tether_scope_admits(thread_id)"
    policies = (
        ("tether_everyone", "ALL", "PERMISSIVE", "PUBLIC", "true", "true"),
        ("tether_scope_select", "SELECT", "RESTRICTIVE", None, readable, None),
        ("tether_scope_insert", "INSERT", "RESTRICTIVE", None, None, admits),
        ("tether_scope_update", "UPDATE", "RESTRICTIVE", None, in_scope, admits),
        ("tether_scope_delete", "DELETE", "RESTRICTIVE", None, in_scope, None),
    )
    enable = sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(name)
    out: list[Any] = [enable]
    for policy, command, kind, to, using, check in policies:
        out.append(sql.SQL("DROP POLICY IF EXISTS {} ON {}").format(sql.Identifier(policy), name))
        text = "CREATE POLICY {} ON {} AS " + kind + " FOR " + command + " TO {}"
        if using is not None:
            text += f" USING ({using})"
        if check is not None:
            text += f" WITH CHECK ({check})"
        out.append(
            sql.SQL(text).format(
                sql.Identifier(policy), name, sql.SQL("PUBLIC") if to == "PUBLIC" else group
            )
        )
    return out


async def _schema(conn: Conn) -> str:
    cur = await conn.execute("SELECT current_schema()")
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])
