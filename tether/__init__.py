"""tether: a durable runtime for long-running LangGraph agents.

The public API is listed in ``__all__`` below and locked by
``tests/test_exported_members.py``; everything else is reachable through the
subpackages (``tether.checkpointing``, ``tether.steps``, ``tether.approvals``,
``tether.graphs``, ``tether.crashtest``, ``tether.runtime``) but may change without notice.

Only the errors and the version are imported eagerly; every other name loads
its subpackage on first use, so ``import tether.checkpointing`` does not pull in
the step layer, approvals, the reference agents or the crash harness.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from tether._lazy import lazy_attributes as _lazy_attributes
from tether._version import __version__
from tether.errors import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
    MissingRedisModuleError,
    TetherError,
)

if _TYPE_CHECKING:
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
    from tether.checkpointing import (
        EncryptionError,
        KeyRing,
        open_checkpointer,
        open_checkpointer_sync,
        rotate_keys,
    )
    from tether.crashtest import (
        CrashTarget,
        run_crashtest,
    )
    from tether.graphs import (
        ScriptedChatModel,
    )
    from tether.runtime import (
        Runtime,
        SyncRuntime,
        Worker,
        aunfinished,
        unfinished,
    )
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
        forget_thread,
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
    "Runtime",
    "SafeAlternative",
    "ScriptedChatModel",
    "Step",
    "Stop",
    "SyncRuntime",
    "TetherError",
    "ToolOutcomeUnknownError",
    "VersionMismatchError",
    "Worker",
    "__version__",
    "arequest_approval",
    "aunfinished",
    "decide",
    "decide_sync",
    "durable_tool",
    "expire_due",
    "expire_due_sync",
    "forget_thread",
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

__getattr__ = _lazy_attributes(
    __name__,
    {
        "ApprovalError": "tether.approvals",
        "Approvers": "tether.approvals",
        "Budget": "tether.steps",
        "BudgetExceededError": "tether.steps",
        "ContextBuilder": "tether.steps",
        "CrashTarget": "tether.crashtest",
        "EncryptionError": "tether.checkpointing.encryption",
        "Escalate": "tether.approvals",
        "KeyRing": "tether.checkpointing.encryption",
        "NonDeterminismError": "tether.steps",
        "Price": "tether.steps",
        "ReconcileResult": "tether.steps",
        "RecordedChatModel": "tether.steps",
        "Runtime": "tether.runtime",
        "SafeAlternative": "tether.approvals",
        "ScriptedChatModel": "tether.graphs",
        "Step": "tether.steps",
        "Stop": "tether.approvals",
        "SyncRuntime": "tether.runtime",
        "ToolOutcomeUnknownError": "tether.steps",
        "VersionMismatchError": "tether.steps",
        "Worker": "tether.runtime",
        "arequest_approval": "tether.approvals",
        "aunfinished": "tether.runtime",
        "decide": "tether.approvals",
        "decide_sync": "tether.approvals",
        "durable_tool": "tether.steps",
        "expire_due": "tether.approvals",
        "expire_due_sync": "tether.approvals",
        "forget_thread": "tether.steps",
        "open_checkpointer": "tether.checkpointing",
        "open_checkpointer_sync": "tether.checkpointing",
        "pin_versions": "tether.steps",
        "read_steps": "tether.steps",
        "read_steps_sync": "tether.steps",
        "recorded": "tether.steps",
        "request_approval": "tether.approvals",
        "requires_approval": "tether.approvals",
        "rotate_keys": "tether.checkpointing.rotation",
        "run_crashtest": "tether.crashtest",
        "transcript_channel": "tether.steps",
        "unfinished": "tether.runtime",
        "with_budget": "tether.steps",
    },
)
