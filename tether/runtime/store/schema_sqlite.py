"""Version 1 of the run store's schema for SQLite (design §3.2.3), one statement each.

The same tables and columns as PostgreSQL, with these differences: JSON is
``TEXT``, times are ``REAL`` unix seconds written by the caller (no defaults:
every writer passes its ``time.time()``), booleans are ``INTEGER``, ``seq`` is
assigned as ``MAX(seq) + 1`` inside the write transaction, events are
``WITHOUT ROWID``, and there is no fence function (the saver's TEMP triggers do
that job, §3.4.4).
"""

from __future__ import annotations

__all__ = ["V1"]

V1: tuple[str, ...] = (
    """\
CREATE TABLE tether_assistants (
    assistant_id TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL DEFAULT '',
    graph_id     TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT,
    config       TEXT NOT NULL DEFAULT '{}',
    context      TEXT NOT NULL DEFAULT '{}',
    metadata     TEXT NOT NULL DEFAULT '{}',
    version      INTEGER NOT NULL DEFAULT 1,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL
)""",
    """\
CREATE INDEX tether_assistants_tenant_graph
    ON tether_assistants (tenant_id, graph_id, created_at)""",
    """\
CREATE TABLE tether_assistant_versions (
    assistant_id TEXT NOT NULL REFERENCES tether_assistants ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    graph_id     TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT,
    config       TEXT NOT NULL,
    context      TEXT NOT NULL,
    metadata     TEXT NOT NULL,
    created_at   REAL NOT NULL,
    PRIMARY KEY (assistant_id, version)
)""",
    """\
CREATE TABLE tether_threads (
    thread_id        TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL DEFAULT 'idle'
                     CHECK (status IN ('idle', 'busy', 'interrupted', 'error')),
    metadata         TEXT NOT NULL DEFAULT '{}',
    config           TEXT NOT NULL DEFAULT '{}',
    state_values     TEXT,
    interrupts       TEXT NOT NULL DEFAULT '{}',
    error            TEXT,
    active_run_id    TEXT,
    temporary        INTEGER NOT NULL DEFAULT 0,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    state_updated_at REAL NOT NULL
)""",
    """\
CREATE INDEX tether_threads_tenant_status
    ON tether_threads (tenant_id, status, updated_at DESC)""",
    """\
CREATE TABLE tether_runs (
    run_id              TEXT PRIMARY KEY,
    seq                 INTEGER NOT NULL UNIQUE,
    tenant_id           TEXT NOT NULL DEFAULT '',
    thread_id           TEXT NOT NULL REFERENCES tether_threads ON DELETE CASCADE,
    assistant_id        TEXT NOT NULL,
    graph_id            TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN
                        ('pending', 'running', 'interrupted', 'success', 'error', 'cancelled',
                         'timeout')),
    multitask_strategy  TEXT NOT NULL DEFAULT 'enqueue'
                        CHECK (multitask_strategy IN
                               ('reject', 'interrupt', 'rollback', 'enqueue')),
    kwargs              TEXT NOT NULL DEFAULT '{}',
    input               TEXT,
    input_kind          TEXT NOT NULL DEFAULT 'input'
                        CHECK (input_kind IN ('input', 'command', 'none')),
    metadata            TEXT NOT NULL DEFAULT '{}',
    attempt             INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL DEFAULT 3,
    resumes             INTEGER NOT NULL DEFAULT 0,
    fence               INTEGER NOT NULL DEFAULT 0,
    worker_id           TEXT,
    lease_expires_at    REAL,
    available_at        REAL NOT NULL,
    deadline_at         REAL,
    step_timeout_s      REAL,
    cancel_action       TEXT CHECK (cancel_action IN ('interrupt', 'rollback')),
    cancel_reason       TEXT,
    cancel_requested_at REAL,
    ended_reason        TEXT,
    waiting_on          TEXT NOT NULL DEFAULT '[]',
    error               TEXT,
    last_seq            INTEGER NOT NULL DEFAULT 0,
    created_at          REAL NOT NULL,
    updated_at          REAL NOT NULL,
    started_at          REAL,
    ended_at            REAL
)""",
    "CREATE INDEX tether_runs_claim ON tether_runs (available_at, seq) WHERE status = 'pending'",
    """\
CREATE INDEX tether_runs_thread_pending ON tether_runs (thread_id, seq)
    WHERE status = 'pending'""",
    "CREATE INDEX tether_runs_lease ON tether_runs (lease_expires_at) WHERE status = 'running'",
    "CREATE INDEX tether_runs_worker ON tether_runs (worker_id) WHERE status = 'running'",
    "CREATE INDEX tether_runs_thread ON tether_runs (thread_id, seq)",
    "CREATE INDEX tether_runs_tenant_status ON tether_runs (tenant_id, status, created_at DESC)",
    """\
CREATE INDEX tether_runs_deadline ON tether_runs (deadline_at)
    WHERE deadline_at IS NOT NULL AND status IN ('pending', 'running', 'interrupted')""",
    """\
CREATE UNIQUE INDEX tether_runs_one_running_per_thread
    ON tether_runs (thread_id) WHERE status = 'running'""",
    """\
CREATE TABLE tether_run_events (
    run_id     TEXT NOT NULL REFERENCES tether_runs ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    ns         TEXT NOT NULL DEFAULT '',
    data       TEXT NOT NULL,
    fence      INTEGER,
    worker_id  TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID""",
    """\
CREATE TABLE tether_crons (
    cron_id          TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL DEFAULT '',
    assistant_id     TEXT NOT NULL,
    thread_id        TEXT REFERENCES tether_threads ON DELETE CASCADE,
    schedule         TEXT NOT NULL,
    timezone         TEXT,
    payload          TEXT NOT NULL DEFAULT '{}',
    metadata         TEXT NOT NULL DEFAULT '{}',
    on_run_completed TEXT CHECK (on_run_completed IN ('delete', 'keep')),
    enabled          INTEGER NOT NULL DEFAULT 1,
    end_time         REAL,
    user_id          TEXT,
    next_run_at      REAL NOT NULL,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL
)""",
    "CREATE INDEX tether_crons_due ON tether_crons (next_run_at) WHERE enabled = 1",
    """\
CREATE TABLE tether_cron_fires (
    cron_id TEXT NOT NULL REFERENCES tether_crons ON DELETE CASCADE,
    fire_at REAL NOT NULL,
    run_id  TEXT,
    PRIMARY KEY (cron_id, fire_at)
)""",
    """\
CREATE TABLE tether_workers (
    worker_id      TEXT PRIMARY KEY,
    host           TEXT NOT NULL,
    pid            INTEGER NOT NULL,
    graphs         TEXT NOT NULL DEFAULT '[]',
    concurrency    INTEGER NOT NULL,
    started_at     REAL NOT NULL,
    last_heartbeat REAL NOT NULL,
    stopping       INTEGER NOT NULL DEFAULT 0
)""",
)
