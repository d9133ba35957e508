"""Version 1 of the run store's schema for PostgreSQL (design §3.2.2), one statement each.

Times are ``timestamptz`` compared with the server's ``now()``; JSON columns are
``jsonb`` except values that may be sealed (``input``, ``state_values``,
``error``, event ``data``), which are text. ``tether_assert_fence`` is the
in-transaction fence check the checkpoint and record writers call (§3.4.3).
"""

from __future__ import annotations

__all__ = ["V1"]

V1: tuple[str, ...] = (
    """\
CREATE TABLE tether_assistants (
    assistant_id TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL DEFAULT '',          -- '' = shared (system assistants)
    graph_id     TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT,
    config       JSONB NOT NULL DEFAULT '{}',
    context      JSONB NOT NULL DEFAULT '{}',
    metadata     JSONB NOT NULL DEFAULT '{}',
    version      INTEGER NOT NULL DEFAULT 1,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
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
    config       JSONB NOT NULL,
    context      JSONB NOT NULL,
    metadata     JSONB NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (assistant_id, version)
)""",
    """\
CREATE TABLE tether_threads (
    thread_id        TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL DEFAULT 'idle'
                     CHECK (status IN ('idle', 'busy', 'interrupted', 'error')),
    metadata         JSONB NOT NULL DEFAULT '{}',
    config           JSONB NOT NULL DEFAULT '{}',
    state_values     TEXT,                           -- last values (JSON or 'enc1:' sealed)
    interrupts       JSONB NOT NULL DEFAULT '{}',    -- {task_id: [{id, value}]} (LangGraph's)
    error            TEXT,                           -- JSON {"error","message"}
    active_run_id    TEXT,                           -- the per-thread mutex (I2)
    temporary        BOOLEAN NOT NULL DEFAULT false, -- stateless run thread, deleted on completion
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    state_updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)""",
    """\
CREATE INDEX tether_threads_tenant_status ON tether_threads (tenant_id, status, updated_at DESC)""",
    """\
CREATE INDEX tether_threads_metadata ON tether_threads USING GIN (metadata jsonb_path_ops)""",
    """\
CREATE TABLE tether_runs (
    run_id              TEXT PRIMARY KEY,
    seq                 BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,   -- creation order (FIFO)
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
    kwargs              JSONB NOT NULL DEFAULT '{}',  -- config, context, stream_mode, subgraphs,
                                                      -- interrupt_before/after, durability,
                                                      -- checkpoint_id, webhook, feedback_keys,
                                                      -- on_completion, temporary
    input               TEXT,                         -- pending input or command (JSON or 'enc1:')
    input_kind          TEXT NOT NULL DEFAULT 'input'
                        CHECK (input_kind IN ('input', 'command', 'none')),
    metadata            JSONB NOT NULL DEFAULT '{}',
    attempt             INTEGER NOT NULL DEFAULT 0,   -- claims since the last enqueue by the API
    max_attempts        INTEGER NOT NULL DEFAULT 3,   -- LangGraph's BG_JOB_MAX_RETRIES
    resumes             INTEGER NOT NULL DEFAULT 0,   -- times resumed from 'interrupted'
    fence               BIGINT NOT NULL DEFAULT 0,    -- +1 on every claim
    worker_id           TEXT,
    lease_expires_at    TIMESTAMPTZ,
    available_at        TIMESTAMPTZ NOT NULL DEFAULT now(),  -- after_seconds
    deadline_at         TIMESTAMPTZ,
    step_timeout_s      DOUBLE PRECISION,
    cancel_action       TEXT CHECK (cancel_action IN ('interrupt', 'rollback')),
    cancel_reason       TEXT,
    cancel_requested_at TIMESTAMPTZ,
    ended_reason        TEXT,                         -- 'continued by run X', 'deadline passed'
    waiting_on          JSONB NOT NULL DEFAULT '[]',  -- [{"interrupt_id","ns","approval_id"}]
    error               TEXT,                         -- JSON {"error","message"}
    last_seq            BIGINT NOT NULL DEFAULT 0,    -- last event seq
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    started_at          TIMESTAMPTZ,
    ended_at            TIMESTAMPTZ
)""",
    """\
CREATE INDEX tether_runs_claim ON tether_runs (available_at, seq) WHERE status = 'pending'""",
    """\
CREATE INDEX tether_runs_thread_pending ON tether_runs (thread_id, seq) WHERE status = 'pending'""",
    """\
CREATE INDEX tether_runs_lease ON tether_runs (lease_expires_at) WHERE status = 'running'""",
    """\
CREATE INDEX tether_runs_worker ON tether_runs (worker_id) WHERE status = 'running'""",
    """\
CREATE INDEX tether_runs_thread ON tether_runs (thread_id, seq)""",
    """\
CREATE INDEX tether_runs_tenant_status ON tether_runs (tenant_id, status, created_at DESC)""",
    """\
CREATE INDEX tether_runs_deadline ON tether_runs (deadline_at)
    WHERE deadline_at IS NOT NULL AND status IN ('pending', 'running', 'interrupted')""",
    """\
CREATE INDEX tether_runs_waiting ON tether_runs USING GIN (waiting_on jsonb_path_ops)
    WHERE status = 'interrupted'""",
    """\
CREATE UNIQUE INDEX tether_runs_one_running_per_thread
    ON tether_runs (thread_id) WHERE status = 'running'""",
    """\
CREATE TABLE tether_run_events (
    run_id     TEXT NOT NULL REFERENCES tether_runs ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    kind       TEXT NOT NULL,         -- 'node.started' … or a LangGraph SSE event name
    ns         TEXT NOT NULL DEFAULT '',  -- subgraph namespace, '|'-joined
    data       TEXT NOT NULL,         -- JSON or 'enc1:'
    fence      BIGINT,                -- NULL: control-plane event (API, scheduler)
    worker_id  TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
)""",
    """\
CREATE TABLE tether_crons (
    cron_id          TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL DEFAULT '',
    assistant_id     TEXT NOT NULL,
    thread_id        TEXT REFERENCES tether_threads ON DELETE CASCADE,
    schedule         TEXT NOT NULL,
    timezone         TEXT,
    payload          JSONB NOT NULL DEFAULT '{}',
    metadata         JSONB NOT NULL DEFAULT '{}',
    on_run_completed TEXT CHECK (on_run_completed IN ('delete', 'keep')),
    enabled          BOOLEAN NOT NULL DEFAULT true,
    end_time         TIMESTAMPTZ,
    user_id          TEXT,
    next_run_at      TIMESTAMPTZ NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
)""",
    """\
CREATE INDEX tether_crons_due ON tether_crons (next_run_at) WHERE enabled""",
    """\
CREATE TABLE tether_cron_fires (  -- procrastinate's periodic_defers idea: one fire per slot
    cron_id TEXT NOT NULL REFERENCES tether_crons ON DELETE CASCADE,
    fire_at TIMESTAMPTZ NOT NULL,
    run_id  TEXT,
    PRIMARY KEY (cron_id, fire_at)
)""",
    """\
CREATE TABLE tether_workers (
    worker_id      TEXT PRIMARY KEY,        -- '<host>:<pid>:<6 hex>'
    host           TEXT NOT NULL,
    pid            INTEGER NOT NULL,
    graphs         JSONB NOT NULL DEFAULT '[]',
    concurrency    INTEGER NOT NULL,
    started_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_heartbeat TIMESTAMPTZ NOT NULL DEFAULT now(),
    stopping       BOOLEAN NOT NULL DEFAULT false
)""",
    """\
CREATE FUNCTION tether_assert_fence(p_run_id TEXT, p_fence BIGINT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM tether_runs
     WHERE run_id = p_run_id AND fence = p_fence AND status = 'running'
       FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tether: run % no longer holds fence %', p_run_id, p_fence
              USING ERRCODE = 'TL001';
    END IF;
END $$""",
)
