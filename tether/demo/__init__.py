"""``tether demo``: the refund agent, a stored approval, and a decision from another process.

:func:`run_demo` loads on first use, so the command line stays quick to start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_attributes

if TYPE_CHECKING:
    from tether.demo.run import run_demo

__all__ = ["run_demo"]

__getattr__ = lazy_attributes(__name__, {"run_demo": "tether.demo.run"})
