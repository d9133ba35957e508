"""A project's custom auth, as LangGraph's docs write one: who is the ``x-user`` header,
everything a user makes is theirs (``owner``), only admins delete threads, read-only users
start no runs."""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

auth = Auth()

USERS: dict[str, dict[str, Any]] = {
    "alice": {"identity": "alice", "permissions": ["approver"]},
    # alice's identity, allowed to read her threads but not to run anything on them
    "alice-viewer": {"identity": "alice", "permissions": ["read-only"]},
    "bob": {"identity": "bob", "permissions": []},
    "root": {"identity": "root", "permissions": ["admin"]},
    # may erase (the /v1/erasure role), but the threads.delete handler wants an admin
    "dpo": {"identity": "dpo", "permissions": ["erasure"]},
    "tina": {"identity": "tina", "permissions": [], "tenant": "other-company"},
}


@auth.authenticate
async def authenticate(
    headers: dict[bytes, bytes], path: str, method: str, body: Any, path_params: dict[str, str]
) -> Any:
    name = headers.get(b"x-user", b"").decode("utf-8", "replace")
    if name == "boom":
        raise RuntimeError("the identity provider is down")
    if path_params.get("thread_id") == "blocked-by-auth":
        raise Auth.exceptions.HTTPException(status_code=403, detail=f"{method} {path} is blocked")
    if name == "signed" and isinstance(body, dict) and body.get("signature") == "ok":
        return {"identity": "signed-body"}
    if name not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail=f"who is {name[:20]!r}?")
    return USERS[name]


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, str]:
    metadata = value.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.threads.create_run
@auth.on.threads.update
async def writes_need_more_than_reading(
    ctx: Auth.types.AuthContext, value: dict[str, Any]
) -> dict[str, str] | bool:
    if "read-only" in ctx.permissions:
        return False
    return await owner_only(ctx, value)


@auth.on.threads.delete
async def admins_delete(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> bool:
    return "admin" in ctx.permissions


@auth.on.assistants.search
async def shared_assistants(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    return None


@auth.on.assistants.read
async def read_assistants(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> Any:
    return None


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> bool | None:
    """Each user's items under their identity, as LangGraph's docs scope a store;
    nobody writes under ``locked``."""
    namespace = tuple(value.get("namespace") or ())
    if namespace[:1] == ("locked",):
        return False
    value["namespace"] = (ctx.user.identity, *namespace)
    return None
