"""The step log's hash chain: each step's link covers the link of the step before it.

For step ``n`` of a thread, two values are stored beside the step (in every
backend, written by the statement, transaction or script that writes the step):

* ``digest_n``: a hash of the step's content, computed by the writer over
  ``aad("step-chain", thread, text)`` (length-prefixed, see
  :func:`tether.checkpointing.encryption.aad`), where ``text`` is the step's
  JSON as the writer encoded it, before any encryption. Without encryption it
  is SHA-256; with encryption it is HMAC-SHA256 under the store's keyed-hash
  secret (:class:`~tether.store.KeyedHash`), so a stored digest reveals
  nothing about a small value, and nobody without the key ring can compute
  the digest of an edited step.
* ``link_n = SHA-256("{link_(n-1)}:{n}:{digest_n}")`` in hex, with
  ``link_(-1)`` = :data:`GENESIS`. It is computed from the link at the head
  of the thread's chain, inside the write itself (the PostgreSQL transaction
  that takes the thread's append lock, SQLite's ``BEGIN IMMEDIATE``
  transaction), or, on Redis, whose scripts cannot hash, by the writer from the
  head it expects, which the Redis script compares with the stored head before
  writing (compare-and-set, :mod:`._chain_tail`). So appends that race
  (parallel nodes of one superstep, several workers) still form one line in
  index order, and a step write usually takes no extra round trip.

The digest covers the plaintext, not the envelope, so ``tether keys rotate``
(which re-encrypts envelopes) leaves the chain valid.

Steps written before the chain existed have no link; :func:`verify` reports
them as "unchained before step N" and starts the chain at the first linked
step. A step removed by ``delete_for_runs`` keeps its digest and link (hashes
only), so the chain stays whole and the step is reported as removed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tether.checkpointing import aad
from tether.store._keyed import KeyedHash

__all__ = [
    "CHAIN_DOMAIN",
    "GENESIS",
    "ChainHead",
    "ChainReport",
    "ChainRow",
    "chain_link",
    "head_of",
    "merge_rows",
    "step_digest",
    "verify",
]

CHAIN_DOMAIN = "step-chain"
GENESIS = "0" * 64
"""The link before a thread's first chained step."""


def step_digest(keyed: KeyedHash | None, thread_id: str, text: str) -> str:
    """The hex digest of one step's JSON text (keyed when the store is encrypted)."""
    if keyed is not None:
        return keyed.hexdigest(CHAIN_DOMAIN, thread_id, text)
    return hashlib.sha256(aad(CHAIN_DOMAIN, thread_id, text)).hexdigest()


def chain_link(prev: str, index: int, digest: str) -> str:
    """The link of step ``index`` (what PostgreSQL computes inside the write, too)."""
    return hashlib.sha256(f"{prev}:{index}:{digest}".encode("ascii")).hexdigest()


@dataclass(frozen=True)
class ChainRow:
    """One index of a thread's log as stored: its text and its chain entry, each maybe absent.

    Attributes:
        index: The step's index.
        text: The stored step (an envelope when encrypted), or ``None`` if removed.
        digest: The stored digest, or ``None`` for a step written before the chain.
        link: The stored link, or ``None`` likewise.
    """

    index: int
    text: str | None
    digest: str | None
    link: str | None


@dataclass(frozen=True)
class ChainHead:
    """The newest link of a thread's chain: keep it elsewhere to detect a truncated log.

    Attributes:
        index: The index of the newest chained step.
        link: Its link (64 hex characters).
    """

    index: int
    link: str


@dataclass(frozen=True)
class ChainReport:
    """What :func:`tether.steps.verify_chain` found in one thread's step log.

    Attributes:
        thread_id: The thread.
        steps: How many indexes the log holds (steps, and removed steps' links).
        ok: ``True`` if the chain is unbroken (and reaches ``expected_head``, if given).
        broken_at: The index where the chain breaks, or ``None``.
        reason: Why it breaks there, or ``None``.
        unchained_before: Steps below this index were written before the chain
            existed (they are not checked); ``None`` if there are none.
        removed: Indexes whose step was deleted with its run (``delete_for_runs``)
            and whose link remains.
        head: The newest link, or ``None`` if no step is chained.
    """

    thread_id: str
    steps: int
    ok: bool
    broken_at: int | None = None
    reason: str | None = None
    unchained_before: int | None = None
    removed: tuple[int, ...] = field(default_factory=tuple)
    head: ChainHead | None = None


def head_of(rows: Sequence[ChainRow]) -> ChainHead | None:
    """The newest link among ``rows`` (ordered by index)."""
    for row in reversed(rows):
        if row.link is not None:
            return ChainHead(row.index, row.link)
    return None


# Opens a stored step: returns its JSON text, or raises if it cannot be authenticated.
Opener = Callable[[int, str], str]


def verify(
    thread_id: str,
    rows: Sequence[ChainRow],
    open_text: Opener,
    keyed: KeyedHash | None,
    expected_head: ChainHead | None = None,
) -> ChainReport:
    """Walk the chain in index order; report the first place where it does not hold.

    Args:
        thread_id: The thread.
        rows: Every index of its log, ordered.
        open_text: Decrypts and authenticates a stored step (identity when plain).
        keyed: The store's keyed hash (with encryption), else ``None``.
        expected_head: A head kept elsewhere (e.g. an audit summary); the chain
            must contain it.
    """
    prev, legacy, started = GENESIS, 0, False
    removed: list[int] = []
    unchained: int | None = None

    def broken(index: int, reason: str) -> ChainReport:
        return ChainReport(
            thread_id, len(rows), False, index, reason, unchained, tuple(removed), head_of(rows)
        )

    for row in rows:
        if row.link is None or row.digest is None:
            if started:
                return broken(row.index, "the step carries no link (inserted, or its link removed)")
            legacy += 1
            continue
        if not started:
            started, unchained = True, (row.index if legacy else None)
        if row.text is None:
            removed.append(row.index)
        else:
            problem = _content_problem(row, open_text, keyed, thread_id)
            if problem:
                return broken(row.index, problem)
        if chain_link(prev, row.index, row.digest) != row.link:
            return broken(
                row.index,
                "its link does not follow the step before it (a step was removed or "
                "inserted before it, or the link was edited)",
            )
        prev = row.link
    head = head_of(rows)
    if expected_head is not None and not _reaches(rows, expected_head):
        at = expected_head.index
        return broken(at, f"the chain does not reach the expected head {expected_head.link[:12]}…")
    return ChainReport(thread_id, len(rows), True, None, None, unchained, tuple(removed), head)


def _content_problem(
    row: ChainRow, open_text: Opener, keyed: KeyedHash | None, thread_id: str
) -> str | None:
    assert row.text is not None
    try:
        text = open_text(row.index, row.text)
    except Exception as exc:  # any failure to authenticate is a break, named by its error
        return f"the step cannot be read as written ({type(exc).__name__}: {exc})"
    if step_digest(keyed, thread_id, text) != row.digest:
        return "its content does not match its digest (the step was edited)"
    return None


def _reaches(rows: Sequence[ChainRow], head: ChainHead) -> bool:
    return any(row.index == head.index and row.link == head.link for row in rows)


def merge_rows(
    steps: Sequence[tuple[int, str]], links: Sequence[tuple[int, str, str]]
) -> list[ChainRow]:
    """Join a log's ``(index, text)`` and ``(index, digest, link)`` rows by index, ordered."""
    texts = dict(steps)
    entries = {index: (digest, link) for index, digest, link in links}
    return [
        ChainRow(index, texts.get(index), *entries.get(index, (None, None)))
        for index in sorted(texts.keys() | entries.keys())
    ]
