"""Checkpointers for every backend tether supports, opened from one URL.

``open_checkpointer(url)`` yields a set-up LangGraph ``BaseCheckpointSaver``
for ``memory://``, ``sqlite:///``, ``postgresql://`` or ``redis://``, each with
the full capability set of LangGraph's conformance suite.
"""

from tether.checkpointing._opener import open_checkpointer
from tether.checkpointing._sync import open_checkpointer_sync
from tether.checkpointing._url import SCHEMES, CheckpointerURL, parse_url

__all__ = [
    "SCHEMES",
    "CheckpointerURL",
    "open_checkpointer",
    "open_checkpointer_sync",
    "parse_url",
]
