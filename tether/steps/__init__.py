"""The wrapper node layer: recorded models, durable tools, the step log, pins and budgets."""

from tether.steps._budget import Budget, Price, with_budget
from tether.steps._chain import chain_head, chain_head_sync, verify_chain, verify_chain_sync
from tether.steps._copy import copy_for_replay, copy_steps, copy_steps_sync, on_replay_copy
from tether.steps._errors import (
    BudgetExceededError,
    NonDeterminismError,
    NotRecordedError,
    RecordRaceError,
    StepsError,
    ToolOutcomeUnknownError,
    VersionMismatchError,
)
from tether.steps._forget import forget_thread
from tether.steps._log import Step, append_step, read_steps, read_steps_sync
from tether.steps._model import RecordedChatModel, RecordedModel, recorded
from tether.steps._scope import ROOT_KEY as BUDGET_ROOT_KEY
from tether.steps._scope import replay_only
from tether.steps._tools import DurableTool, ReconcileResult, durable_tool, idempotency_key
from tether.steps._transcript import ContextBuilder, ContextWindow, transcript_channel
from tether.steps._versions import VersionPins, graph_fingerprint, pin_versions

__all__ = [
    "BUDGET_ROOT_KEY",
    "Budget",
    "BudgetExceededError",
    "ContextBuilder",
    "ContextWindow",
    "DurableTool",
    "NonDeterminismError",
    "NotRecordedError",
    "Price",
    "ReconcileResult",
    "RecordRaceError",
    "RecordedChatModel",
    "RecordedModel",
    "Step",
    "StepsError",
    "ToolOutcomeUnknownError",
    "VersionMismatchError",
    "VersionPins",
    "append_step",
    "chain_head",
    "chain_head_sync",
    "copy_for_replay",
    "copy_steps",
    "copy_steps_sync",
    "durable_tool",
    "forget_thread",
    "graph_fingerprint",
    "idempotency_key",
    "on_replay_copy",
    "pin_versions",
    "read_steps",
    "read_steps_sync",
    "recorded",
    "replay_only",
    "transcript_channel",
    "verify_chain",
    "verify_chain_sync",
    "with_budget",
]
