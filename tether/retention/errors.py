"""The errors of retention and erasure, each naming what was wrong."""

from __future__ import annotations

from tether.errors import ConfigurationError, TetherError

__all__ = ["ErasureError", "RetentionError", "RetentionPolicyError"]


class RetentionError(TetherError):
    """Base class of the retention package's errors."""


class RetentionPolicyError(RetentionError, ConfigurationError):
    """A retention policy (in code or in ``tether.json``) is malformed; the message names
    the field, as ``retention.rules[2].max_age``."""


class ErasureError(RetentionError, ValueError):
    """An erasure request is malformed (no subject, or more than one)."""
