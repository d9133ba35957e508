"""The errors of approval requests and decisions; each names the problem and the fix."""

from __future__ import annotations

from tether.errors import ConfigurationError, TetherError

__all__ = [
    "AlreadyDecidedError",
    "ApprovalConfigError",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalMismatchError",
    "ApprovalNotPendingError",
    "ApproverNotAllowedError",
    "ArgsHashMismatchError",
    "InvalidEditError",
    "UnknownApprovalError",
]


class ApprovalError(TetherError):
    """Base class of every approval error."""


class ApprovalConfigError(ApprovalError, ConfigurationError):
    """An approval gate or expiry policy is configured wrongly (e.g. approve-on-timeout).

    A :class:`tether.errors.ConfigurationError` (and so a ``ValueError``), like every
    other bad setting tether refuses, and still an :class:`ApprovalError`.
    """


class UnknownApprovalError(ApprovalError):
    """No approval request with that id exists (in that thread)."""


class ApproverNotAllowedError(ApprovalError):
    """The person deciding is neither a named approver nor holds an approver role."""


class ApprovalExpiredError(ApprovalError):
    """The request expired; only its expiry policy can settle it now."""


class ArgsHashMismatchError(ApprovalError):
    """The decision names arguments other than the ones the request showed."""


class AlreadyDecidedError(ApprovalError):
    """The request was already decided; a second decision never resumes the run again."""


class ApprovalNotPendingError(ApprovalError):
    """The run is not paused at this request, so there is nothing to resume."""


class InvalidEditError(ApprovalError):
    """Edited arguments do not match the action's argument schema."""


class ApprovalMismatchError(ApprovalError):
    """A replayed step met a decision for another request (non-deterministic step or args)."""
