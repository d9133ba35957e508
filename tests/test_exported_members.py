"""The public API is exactly what ``tether.__all__`` lists; changing it is deliberate."""

import inspect

import pytest

import tether

EXPECTED = [
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


def test_all_is_locked() -> None:
    assert tether.__all__ == EXPECTED


def test_all_is_sorted_and_importable() -> None:
    assert tether.__all__ == sorted(tether.__all__)
    for name in tether.__all__:
        assert getattr(tether, name) is not None, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'tether' has no attribute 'no_such_name'"):
        tether.no_such_name  # noqa: B018  (the read is the test)


def test_no_private_leaks() -> None:
    # Subpackages appear as attributes once imported; everything else must be listed.
    public = {
        n for n in dir(tether) if not n.startswith("_") and not inspect.ismodule(getattr(tether, n))
    }
    assert public - set(tether.__all__) == set()
