"""The store a worker gives its graphs: one tenant's items of the run store's database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tether.runtime.graph_store import SharedStore, TenantStore
from tether.runtime.ids import tenant_store_root


@pytest.fixture
async def shared(runtime_url: str) -> AsyncIterator[SharedStore]:
    store = SharedStore(runtime_url)
    try:
        yield store
    finally:
        await store.aclose()


async def test_each_tenant_reaches_only_its_own_items(shared: SharedStore) -> None:
    loop = asyncio.get_running_loop()
    acme, globex = TenantStore(shared, "acme", loop), TenantStore(shared, "globex", loop)
    await acme.aput(("notes", "deep"), "k", {"v": 1})
    await globex.aput(("notes",), "k", {"v": 2})

    got = await acme.aget(("notes", "deep"), "k")
    assert got is not None
    assert (got.namespace, got.value) == (("notes", "deep"), {"v": 1})
    assert await globex.aget(("notes", "deep"), "k") is None
    assert [(i.namespace, i.value) for i in await acme.asearch(())] == [
        (("notes", "deep"), {"v": 1})
    ]
    assert [(i.namespace, i.value) for i in await globex.asearch(("notes",))] == [
        (("notes",), {"v": 2})
    ]
    assert await acme.alist_namespaces() == [("notes", "deep")]
    assert await acme.alist_namespaces(prefix=("notes",), max_depth=1) == [("notes",)]
    assert await acme.alist_namespaces(suffix=("deep",)) == [("notes", "deep")]
    assert await globex.alist_namespaces(prefix=("notes", "deep")) == []

    await globex.adelete(("notes", "deep"), "k")  # another tenant's key: nothing to delete
    assert await acme.aget(("notes", "deep"), "k") is not None

    # Stored under each tenant's root, where the /store API and erasure look for it.
    raw = await shared.get()
    stored = await raw.aget((tenant_store_root("acme"), "notes", "deep"), "k")
    assert stored is not None
    assert stored.value == {"v": 1}
    assert await raw.aget(("notes", "deep"), "k") is None


async def test_sync_calls_run_on_the_loop_from_a_nodes_thread(shared: SharedStore) -> None:
    loop = asyncio.get_running_loop()
    tenant = TenantStore(shared, "", loop)
    await asyncio.to_thread(tenant.put, ("memories",), "k", {"v": 3})
    got = await asyncio.to_thread(tenant.get, ("memories",), "k")
    assert got is not None
    assert (got.namespace, got.value) == (("memories",), {"v": 3})
    assert await asyncio.to_thread(tenant.list_namespaces) == [("memories",)]


async def test_a_sync_call_on_the_loop_itself_is_refused(shared: SharedStore) -> None:
    tenant = TenantStore(shared, "", asyncio.get_running_loop())
    with pytest.raises(RuntimeError, match="use the async methods"):
        tenant.put(("memories",), "k", {"v": 4})
    assert await tenant.aget(("memories",), "k") is None
