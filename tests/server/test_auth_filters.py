"""``@auth.on`` results as LangGraph's server reads them: allow, 403, or a metadata filter.

These run the handlers of a real ``langgraph_sdk.Auth`` object; no server is needed.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import Auth

from tether.server._authn import AuthError
from tether.server._caller import AuthUser, Caller
from tether.server._custom_auth import CustomAuth, matches, plain

ALICE = Caller("alice", "", ("reader",), AuthUser({"identity": "alice", "permissions": ["reader"]}))


def _auth(result: Any) -> CustomAuth:
    auth = Auth()

    @auth.on.threads.read
    async def read(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> Any:
        return result

    @auth.on.threads
    async def threads(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> Any:
        return {"resource": f"{ctx.resource}.{ctx.action}", "user": ctx.user.identity}

    @auth.on
    async def everything(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> Any:
        return False

    return CustomAuth(auth, routes=[])


@pytest.mark.parametrize(
    ("metadata", "filters", "expected"),
    [
        ({"owner": "a"}, {"owner": "a"}, True),
        ({"owner": "b"}, {"owner": "a"}, False),
        ({}, {"owner": "a"}, False),
        ({"owner": "a"}, {"owner": {"$eq": "a"}}, True),
        ({"team": ["a", "b"]}, {"team": {"$contains": "a"}}, True),
        ({"team": ["a", "b"]}, {"team": {"$contains": ["b", "a"]}}, True),
        ({"team": ["a"]}, {"team": {"$contains": ["a", "c"]}}, False),
        ({"team": "a"}, {"team": {"$contains": "a"}}, False),
        ({"o": "x"}, {"$or": [{"o": "y"}, {"o": "x"}]}, True),
        ({"o": "x"}, {"$or": [{"o": "y"}, {"o": "z"}]}, False),
        ({"o": "x", "p": 1}, {"$and": [{"o": "x"}, {"p": 1}]}, True),
        ({"o": "x"}, None, True),
    ],
)
def test_filters_match_metadata(
    metadata: dict[str, Any], filters: dict[str, Any] | None, expected: bool
) -> None:
    assert matches(metadata, filters) is expected


def test_plain_filters_are_pushed_into_searches() -> None:
    assert plain({"owner": "a", "org": {"$eq": "o"}}) == {"owner": "a", "org": "o"}
    assert plain({"team": {"$contains": "a"}}) is None
    assert plain({"$or": [{"a": 1}, {"a": 2}]}) is None


async def test_the_most_specific_handler_decides() -> None:
    auth = _auth(None)
    assert await auth.authorize(ALICE, "threads", "read", {}) is None
    assert await auth.authorize(ALICE, "threads", "delete", {}) == {
        "resource": "threads.delete",
        "user": "alice",
    }
    with pytest.raises(AuthError) as refused:
        await auth.authorize(ALICE, "assistants", "read", {})
    assert (refused.value.status, refused.value.detail) == (403, "Forbidden")


async def test_no_handler_allows() -> None:
    assert await CustomAuth(Auth(), routes=[]).authorize(ALICE, "threads", "read", {}) is None


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ({"owner": {"$ne": "bob"}}, "use $eq or $contains"),
        ({"$not": {"owner": "bob"}}, "unknown operator '$not'"),
        ({"$or": {"owner": "bob"}}, "$or is not a list of filters"),
        ("alice", "returned str"),
    ],
)
async def test_a_filter_that_would_not_apply_is_a_500(result: Any, problem: str) -> None:
    with pytest.raises(AuthError) as refused:
        await _auth(result).authorize(ALICE, "threads", "read", {})
    assert refused.value.status == 500
    assert problem in refused.value.detail


async def test_a_handlers_http_exception_is_the_answer() -> None:
    auth = Auth()

    @auth.on.threads.create
    async def create(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
        raise Auth.exceptions.HTTPException(status_code=429, detail="slow down")

    with pytest.raises(AuthError) as refused:
        await CustomAuth(auth, routes=[]).authorize(ALICE, "threads", "create", {})
    assert (refused.value.status, refused.value.detail) == (429, "slow down")
