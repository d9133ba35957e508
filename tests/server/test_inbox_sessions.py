"""The inbox's login sessions (:mod:`tether.server._sessions`): an opaque token, kept only as
its hash, that ends when it expires or at logout."""

from __future__ import annotations

import hashlib

from tether.server._sessions import Sessions


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_lasts_its_lifetime_then_is_refused() -> None:
    clock = Clock()
    sessions = Sessions(lifetime=60, clock=clock)
    token, session = sessions.start({"x-api-key": "tk_secret"})
    assert sessions.get(token) == session
    assert session.headers == (("x-api-key", "tk_secret"),)
    clock.now += 59
    assert sessions.get(token) == session
    clock.now += 1
    assert sessions.get(token) is None  # expired
    clock.now -= 30
    assert sessions.get(token) is None  # and forgotten: going back does not revive it


def test_only_the_tokens_hash_is_kept() -> None:
    sessions = Sessions()
    token, _ = sessions.start({"authorization": "Bearer abc"})
    kept = sessions._by_digest
    assert token not in kept
    assert hashlib.sha256(token.encode()).hexdigest() in kept
    assert sessions.get(token[:-1] + ("A" if token[-1] != "A" else "B")) is None  # forged
    assert sessions.get("") is None


def test_logout_ends_one_session_and_each_has_its_own_csrf_token() -> None:
    sessions = Sessions()
    first, one = sessions.start({"x-api-key": "k"})
    second, two = sessions.start({"x-api-key": "k"})
    assert first != second
    assert one.csrf != two.csrf
    sessions.end(first)
    assert sessions.get(first) is None
    assert sessions.get(second) == two
