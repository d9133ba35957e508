"""Who is calling: the authenticated user of a request, with its tenant and roles.

Every request the API answers (all but ``/ok`` and ``/info``) is authenticated
first (:mod:`tether.server._authn`); the routes get the :class:`Caller` from
the :func:`caller` dependency. Its tenant scopes every runtime call of the
request, and its identity and roles are what an approval decided over HTTP is
recorded and checked with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

__all__ = ["ANONYMOUS", "AuthUser", "Caller", "caller"]


class AuthUser:
    """The user ``@auth.on`` handlers get as ``ctx.user`` (LangGraph's ``BaseUser``):
    ``identity``, ``display_name``, ``is_authenticated``, ``permissions``, and every
    other field the authenticate handler returned, as attributes and as keys."""

    __slots__ = ("_fields", "_source")

    def __init__(self, fields: Mapping[str, Any], source: Any = None) -> None:
        self._fields = dict(fields)
        self._source = source

    @property
    def identity(self) -> str:
        return str(self._fields["identity"])

    @property
    def display_name(self) -> str:
        return str(self._fields.get("display_name") or self.identity)

    @property
    def is_authenticated(self) -> bool:
        return bool(self._fields.get("is_authenticated", True))

    @property
    def permissions(self) -> Sequence[str]:
        return tuple(self._fields.get("permissions") or ())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._fields:
            return self._fields[name]
        if self._source is not None:
            return getattr(self._source, name)
        raise AttributeError(name)

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __contains__(self, key: object) -> bool:
        return key in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __repr__(self) -> str:
        return f"AuthUser(identity={self.identity!r})"


@dataclass(frozen=True)
class Caller:
    """The authenticated caller of one request.

    Attributes:
        identity: The user's id (an API key's user, or the ``identity`` an
            ``auth.path`` authenticate handler returned).
        tenant: The tenant every runtime call of the request acts for.
        roles: The user's roles (an API key's, or the handler's ``permissions``).
        user: What ``@auth.on`` handlers get as ``ctx.user``.
        source: How the identity was established (``api-key:<key id>``,
            ``auth.path``, ``no-auth``), recorded with an approval's decision.
    """

    identity: str
    tenant: str = ""
    roles: tuple[str, ...] = ()
    user: AuthUser = field(default_factory=lambda: AuthUser({"identity": "anonymous"}))
    source: str = "no-auth"


ANONYMOUS = Caller("anonymous", "", (), AuthUser({"identity": "anonymous"}), "no-auth")
"""The caller of every request when the server runs with ``--no-auth``."""


def caller(request: Request) -> Caller:
    """The request's authenticated :class:`Caller` (a FastAPI dependency).

    Fails closed: a request that did not pass authentication has no caller (401).
    """
    found = getattr(request.state, "tether_caller", None)
    if not isinstance(found, Caller):
        from tether.server._errors import ApiError

        raise ApiError(401, "the request was not authenticated")
    return found
