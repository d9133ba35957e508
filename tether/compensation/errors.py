"""The errors of compensation, each naming the problem and the fix."""

from __future__ import annotations

from tether.errors import ConfigurationError, TetherError

__all__ = ["CompensationConfigError", "CompensationError"]


class CompensationError(TetherError):
    """Compensation could not be carried out as asked."""


class CompensationConfigError(CompensationError, ConfigurationError):
    """A compensation setting is wrong (also a ``ValueError``)."""
