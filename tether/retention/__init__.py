"""Retention and erasure: policies, the sweep, audit summaries and erasure receipts.

- :mod:`~tether.retention.policy`: what a policy says and how it is read from
  ``tether.json`` (``RetentionPolicy``, ``Rule``, ``load_policy``);
- :mod:`~tether.retention.sweep`: the batched, resumable sweep
  (``sweep``, ``sweep_sync``, ``SweepReport``);
- :mod:`~tether.retention.schedule`: the sweep as a scheduler job
  (``scheduled_sweep``);
- :mod:`~tether.retention.summary`: the audit summary written before a
  thread is deleted;
- :mod:`~tether.retention.erasure`: erasure requests and their receipts
  (``erase``, ``erase_sync``, ``ErasureReceipt``);
- :mod:`~tether.retention.audit`: reading summaries and receipts back
  (``audit_trail``);
- :mod:`~tether.retention.probe`: whether a database holds a run store at all
  (``check_run_store``, ``NoRunStoreError``);
- :mod:`~tether.retention.plane`: the run store's retention operations
  (``retention_plane``).

See docs/retention.md.
"""

from tether.retention.audit import AuditTrail, audit_trail
from tether.retention.erasure import ErasureReceipt, erase, erase_store, erase_sync
from tether.retention.errors import ErasureError, RetentionError, RetentionPolicyError
from tether.retention.plane import retention_plane
from tether.retention.policy import (
    CONFIG_FILE,
    RetentionPolicy,
    Rule,
    load_policy,
    parse_duration,
    policy_from_dict,
    project_policy,
)
from tether.retention.probe import NoRunStoreError, check_run_store
from tether.retention.schedule import scheduled_sweep
from tether.retention.summary import build_summary, sha256_text
from tether.retention.sweep import Decision, SweepReport, sweep, sweep_sync

__all__ = [
    "CONFIG_FILE",
    "AuditTrail",
    "Decision",
    "ErasureError",
    "ErasureReceipt",
    "NoRunStoreError",
    "RetentionError",
    "RetentionPolicy",
    "RetentionPolicyError",
    "Rule",
    "SweepReport",
    "audit_trail",
    "build_summary",
    "check_run_store",
    "erase",
    "erase_store",
    "erase_sync",
    "load_policy",
    "parse_duration",
    "policy_from_dict",
    "project_policy",
    "retention_plane",
    "scheduled_sweep",
    "sha256_text",
    "sweep",
    "sweep_sync",
]
