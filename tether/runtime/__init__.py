"""Running graphs durably: for now, the check every resume is decided by.

:func:`unfinished` (and its async twin :func:`aunfinished`) says whether a
run has work left, including the case LangGraph's ``get_state().next`` misses:
a run killed after a step's writes were stored and before its checkpoint was.
"""

from tether.runtime._progress import aunfinished, unfinished

__all__ = ["aunfinished", "unfinished"]
