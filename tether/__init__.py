"""tether: a durable runtime for long-running LangGraph agents.

The public API is listed in ``__all__`` below and locked by
``tests/test_exported_members.py``; everything else is reachable through the
subpackages (``tether.checkpointing``, ``tether.steps``, ``tether.approvals``,
``tether.graphs``, ``tether.crashtest``, ``tether.runtime``) but may change without notice.
"""

from tether._version import __version__
from tether.approvals import (
    ApprovalError,
    Approvers,
    Escalate,
    SafeAlternative,
    Stop,
    arequest_approval,
    decide,
    decide_sync,
    expire_due,
    expire_due_sync,
    request_approval,
    requires_approval,
)
from tether.checkpointing import open_checkpointer, open_checkpointer_sync
from tether.checkpointing.encryption import EncryptionError, KeyRing
from tether.checkpointing.rotation import rotate_keys
from tether.crashtest import CrashTarget, run_crashtest
from tether.errors import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
    MissingRedisModuleError,
    TetherError,
)
from tether.graphs import ScriptedChatModel
from tether.runtime import aunfinished, unfinished
from tether.steps import (
    Budget,
    BudgetExceededError,
    ContextBuilder,
    NonDeterminismError,
    Price,
    ReconcileResult,
    RecordedChatModel,
    Step,
    ToolOutcomeUnknownError,
    VersionMismatchError,
    durable_tool,
    pin_versions,
    read_steps,
    read_steps_sync,
    recorded,
    transcript_channel,
    with_budget,
)

__all__ = [
    "ApprovalError",
    "Approvers",
    "BackendUnavailableError",
    "Budget",
    "BudgetExceededError",
    "ConfigurationError",
    "ContextBuilder",
    "CrashTarget",
    "EncryptionError",
    "Escalate",
    "KeyRing",
    "MissingDependencyError",
    "MissingRedisModuleError",
    "NonDeterminismError",
    "Price",
    "ReconcileResult",
    "RecordedChatModel",
    "SafeAlternative",
    "ScriptedChatModel",
    "Step",
    "Stop",
    "TetherError",
    "ToolOutcomeUnknownError",
    "VersionMismatchError",
    "__version__",
    "arequest_approval",
    "aunfinished",
    "decide",
    "decide_sync",
    "durable_tool",
    "expire_due",
    "expire_due_sync",
    "open_checkpointer",
    "open_checkpointer_sync",
    "pin_versions",
    "read_steps",
    "read_steps_sync",
    "recorded",
    "request_approval",
    "requires_approval",
    "rotate_keys",
    "run_crashtest",
    "transcript_channel",
    "unfinished",
    "with_budget",
]
