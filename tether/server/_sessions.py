"""Inbox login sessions when the server authenticates: a cookie standing for a credential.

On ``/inbox/login`` a person pastes what authenticates them: with the built-in
API keys, their key; with the project's ``auth.path``, the value of the
``Authorization`` header its ``@auth.authenticate`` handler accepts. The server
authenticates a request carrying it (so a bad key is refused there and then),
then starts a session: a random token for the cookie (``HttpOnly``,
``SameSite=Strict``, ``Secure`` over HTTPS), kept server-side only as its
SHA-256, together with the credential, the session's CSRF token and its expiry.

A later request carrying the cookie and no credential of its own is
authenticated as if it carried the session's credential, through the same
authenticator: a key revoked after login stops working at once, and every
``@auth.on`` handler sees the same user as the API would. Sessions live in
the server's memory: a restart logs everyone out.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["COOKIE", "LIFETIME", "Session", "Sessions"]

COOKIE = "tether_inbox_session"
LIFETIME = 8 * 3600.0  # seconds a session lasts after login


@dataclass(frozen=True)
class Session:
    """One login.

    Attributes:
        headers: The credential as the request headers to authenticate with
            (lower-case names).
        csrf: The token every form of the session carries.
        expires: When the session ends (``time.time()`` seconds).
    """

    headers: tuple[tuple[str, str], ...]
    csrf: str
    expires: float


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Sessions:
    """The login sessions of one app, by the SHA-256 of their cookie's token."""

    lifetime: float = LIFETIME
    clock: Callable[[], float] = time.time
    _by_digest: dict[str, Session] = field(default_factory=dict)

    def start(self, headers: dict[str, str]) -> tuple[str, Session]:
        """A new session for ``headers``; returns the cookie's token and the session."""
        self._forget_expired()
        token = secrets.token_urlsafe(32)
        session = Session(
            tuple(sorted(headers.items())), secrets.token_urlsafe(32), self.clock() + self.lifetime
        )
        self._by_digest[_digest(token)] = session
        return token, session

    def get(self, token: str | None) -> Session | None:
        """The live session of a cookie's token (``None``: unknown, forged or expired)."""
        if not token:
            return None
        digest = _digest(token)
        found = self._by_digest.get(digest)
        if found is not None and found.expires <= self.clock():
            del self._by_digest[digest]
            return None
        return found

    def end(self, token: str | None) -> None:
        """End the session of a cookie's token, if any."""
        if token:
            self._by_digest.pop(_digest(token), None)

    def _forget_expired(self) -> None:
        now = self.clock()
        for digest in [d for d, s in self._by_digest.items() if s.expires <= now]:
            del self._by_digest[digest]
