"""What the time-travel debugger raises."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.debug._replay import Divergence

__all__ = ["DebugError", "ReplayDivergenceError"]


class DebugError(TetherError):
    """Bad input to a debugger call, or a call its source cannot serve."""


class ReplayDivergenceError(DebugError):
    """A replay did not reproduce the recorded run: the graph changed since.

    Attributes:
        divergence: The first diverging step: where, and what differs.
    """

    def __init__(self, divergence: Divergence) -> None:
        self.divergence = divergence
        super().__init__(str(divergence))
