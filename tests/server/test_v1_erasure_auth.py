"""Who may erase over HTTP when the server authenticates: an API key's roles and tenant, or
an ``auth.path`` user's permissions and its ``threads.delete`` handler; never a header."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.backends import Backend
from tests.retention.world import marker, open_world, seed
from tests.server.conftest import ServeProcess, _store_url
from tether.retention.summary import sha256_text
from tether.server.apikeys import open_key_store

AUTH_PROJECT = Path(__file__).parent / "authproject" / "langgraph.json"


async def _keys(url: str, *wanted: tuple[str, ...]) -> list[str]:
    """A key for each ``(user, tenant, *roles)``, made as ``tether apikeys create`` does."""
    async with open_key_store(url) as keys:
        return [
            (await keys.create(user=user, tenant=tenant, roles=roles)).secret
            for user, tenant, *roles in wanted
        ]


@pytest.fixture(params=["sqlite", "postgres"])
def keyed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Backend, Path]]:
    with _store_url(request, request.param, tmp_path) as url:
        process = ServeProcess(url, tmp_path, ("--workers", "0"), auth=())
        asyncio.run(_keys(url, ("bootstrap", "acme")))  # the server needs a key to start
        try:
            process.start()
            yield process.base, Backend(request.param, url), tmp_path
        finally:
            process.stop()


async def test_api_keys_roles_and_tenant_decide(keyed: tuple[str, Backend, Path]) -> None:
    base, backend, workdir = keyed
    admin, plain, globex = await _keys(
        backend.url,
        ("root", "acme", "admin"),
        ("pat", "acme", "approver"),
        ("ola", "globex", "erasure"),
    )
    async with open_world(backend, workdir) as world:
        await seed(world, "k-1", "success", days=1, tenant="acme")
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:

        async def erase(key: str, **headers: str) -> httpx.Response:
            return await http.post(
                "/v1/erasure", json={"thread_id": "k-1"}, headers={"x-api-key": key, **headers}
            )

        assert (await http.post("/v1/erasure", json={"thread_id": "k-1"})).status_code == 401
        # the roles are the key's: a header claiming more is not read
        claimed = await erase(plain, **{"x-tether-roles": "admin"})
        assert claimed.status_code == 403, claimed.text
        assert (await erase(globex)).status_code == 404
        async with open_world(backend, workdir) as world:
            assert marker("k-1") in await world.raw()
        done = await erase(admin)
        assert done.status_code == 201, done.text
        assert done.json()["tenant_sha256"] == sha256_text("acme")
        async with open_world(backend, workdir) as world:
            assert marker("k-1") not in await world.raw()
        receipt_id = done.json()["receipt_id"]
        kept = await http.get(f"/v1/erasure/{receipt_id}", headers={"x-api-key": admin})
        assert kept.json() == done.json()
        other = await http.get(f"/v1/erasure/{receipt_id}", headers={"x-api-key": globex})
        assert other.status_code == 404


@pytest.fixture(params=["sqlite", "postgres"])
def custom(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with _store_url(request, request.param, tmp_path) as url:
        process = ServeProcess(url, tmp_path, ("--workers", "0"), project=AUTH_PROJECT, auth=())
        try:
            yield process.start()
        finally:
            process.stop()


async def test_custom_auth_permissions_and_the_delete_handler(custom: str) -> None:
    async with httpx.AsyncClient(base_url=custom, timeout=60) as http:
        created = await http.post("/threads", json={}, headers={"x-user": "alice"})
        assert created.status_code == 200, created.text
        thread_id = created.json()["thread_id"]

        async def erase(user: str) -> httpx.Response:
            return await http.post(
                "/v1/erasure", json={"thread_id": thread_id}, headers={"x-user": user}
            )

        assert (await erase("bob")).status_code == 403  # no erasure permission
        refused = await erase("dpo")  # may erase, but threads.delete wants an admin
        assert refused.status_code == 403, refused.text
        shown = await http.get(f"/threads/{thread_id}", headers={"x-user": "alice"})
        assert shown.status_code == 200
        assert (await erase("tina")).status_code == 403
        # nor by naming the thread's owner or the tenant instead of the thread
        for subject in ({"user": "alice"},):
            sideways = await http.post("/v1/erasure", json=subject, headers={"x-user": "dpo"})
            assert sideways.status_code == 403, (subject, sideways.text)
            shown = await http.get(f"/threads/{thread_id}", headers={"x-user": "alice"})
            assert shown.status_code == 200, subject
        done = await erase("root")
        assert done.status_code == 201, done.text
        assert done.json()["counts"]["threads"] == 1
        gone = await http.get(f"/threads/{thread_id}", headers={"x-user": "alice"})
        assert gone.status_code == 404
