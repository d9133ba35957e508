"""Exact matching of ids on the RediSearch TAG fields of the upstream indexes.

The upstream indexes declare ``thread_id``, ``checkpoint_ns``, ``checkpoint_id``,
``run_id`` and ``channel`` plain TAG fields with ``SEPARATOR ","``. RediSearch
splits such a value on ``,``, trims ASCII whitespace off each part, drops empty
parts and folds ASCII case, so a query on a whole id misses ``"a,b"`` and
``"x y "`` and matches ``"Alice"`` for ``"alice"``.

A :class:`Match` therefore carries two things: a query that finds *at least*
every wanted document (it asks for each part the index stored for an id, as the
index split and trimmed it), and the exact stored values that every returned
document is checked against. Parts a query cannot express (control characters)
are left out of the query, which only widens it; an id with no expressible part
gives no condition at all, so the search reads the whole index and the exact
check alone picks the documents (slow, but only for such ids).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["EVERYTHING", "Match", "tag_parts"]

# What RediSearch trims off each tag (C isspace; not Unicode spaces such as NBSP).
_WHITESPACE = " \t\n\v\f\r"


def tag_parts(value: str) -> set[str]:
    """The tags a TAG field with ``SEPARATOR ","`` stores for ``value`` (before case folding)."""
    return {part.strip(_WHITESPACE) for part in value.split(",")} - {""}


def _expressible(part: str) -> bool:
    # The query parser reads other control characters as separators, however
    # escaped. A part still starting or ending in (Unicode) whitespace is left
    # out too: a server that trimmed that as well would store it otherwise.
    if part[0].isspace() or part[-1].isspace():
        return False
    return not any(unicodedata.category(c) == "Cc" and c not in _WHITESPACE for c in part)


def _escape(part: str) -> str:
    # Every ASCII character but letters and digits may be query syntax; a backslash
    # makes any of them literal. Other characters are never syntax.
    return "".join(f"\\{c}" if c < "\x80" and not c.isalnum() else c for c in part)


def _tag_clause(field: str, value: str) -> str | None:
    """A clause matching every document whose ``field`` holds ``value`` (and maybe others)."""
    parts = sorted(p for p in tag_parts(value) if _expressible(p))
    if not parts:
        return None
    return " ".join(f"@{field}:{{{_escape(p)}}}" for p in parts)


@dataclass(frozen=True)
class Match:
    """A search: a widened RediSearch query, and the exact stored values it must yield.

    Attributes:
        query: RediSearch query syntax (``"*"`` for every document).
        exact: ``(field, allowed stored values)`` pairs every result must satisfy.
    """

    query: str = "*"
    exact: tuple[tuple[str, frozenset[str]], ...] = ()

    @classmethod
    def tag(cls, field: str, values: str | Iterable[str]) -> Match:
        """Documents whose TAG ``field`` stores exactly one of ``values`` (stored forms)."""
        wanted = frozenset([values] if isinstance(values, str) else values)
        clauses = [_tag_clause(field, v) for v in sorted(wanted)]
        # A value no query can ask for: read everything, and check exactly.
        expressible = wanted and None not in clauses
        query = " | ".join(f"({c})" for c in clauses) if expressible else "*"
        return cls(query, ((field, wanted),))

    @classmethod
    def numeric(cls, field: str, value: int) -> Match:
        """Documents whose NUMERIC ``field`` equals ``value`` (exact already)."""
        return cls(f"@{field}:[{value} {value}]")

    @classmethod
    def at_least(cls, field: str, value: float) -> Match:
        """Documents whose NUMERIC ``field`` is ``value`` or more."""
        return cls(f"@{field}:[{value!r} +inf]")

    def __and__(self, other: Match) -> Match:
        queries = [q for q in (self.query, other.query) if q != "*"]
        query = " ".join(f"({q})" for q in queries) if queries else "*"
        return Match(query, self.exact + other.exact)

    @property
    def fields(self) -> list[str]:
        """The fields a search must return for :meth:`accepts`."""
        return sorted({name for name, _ in self.exact})

    def accepts(self, doc: Any) -> bool:
        """Whether a search result holds exactly the wanted values."""
        return all(str(getattr(doc, name, "")) in allowed for name, allowed in self.exact)


EVERYTHING = Match()
