"""The store API through the official SDK against a real ``tether serve``, both backends."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import UnprocessableEntityError

from tests.server.conftest import _store_url, serving
from tests.server.store_rows import prefixes, put_item
from tether.runtime.ids import tenant_store_root


@pytest.fixture
def client(server: str) -> LangGraphClient:
    return get_client(url=server)


async def test_put_get_search_namespaces_delete(client: LangGraphClient) -> None:
    root = f"t{uuid.uuid4().hex}"
    await client.store.put_item([root, "alice"], "k1", {"name": "Alice", "score": 1})
    await client.store.put_item([root, "alice"], "k2", {"name": "Alice", "score": 2})
    await client.store.put_item([root, "bob", "notes"], "k1", {"name": "Bob"})

    item = await client.store.get_item([root, "alice"], "k1")
    assert item["namespace"] == [root, "alice"]
    assert item["key"] == "k1"
    assert item["value"] == {"name": "Alice", "score": 1}
    assert item["created_at"]
    assert item["updated_at"]

    await client.store.put_item([root, "alice"], "k1", {"name": "Alice", "score": 10})
    assert (await client.store.get_item([root, "alice"], "k1"))["value"]["score"] == 10

    everything = await client.store.search_items([root], limit=10)
    keys = sorted((tuple(i["namespace"]), i["key"]) for i in everything["items"])
    assert keys == [
        ((root, "alice"), "k1"),
        ((root, "alice"), "k2"),
        ((root, "bob", "notes"), "k1"),
    ]
    bob = await client.store.search_items([root], filter={"name": "Bob"})
    assert [i["namespace"] for i in bob["items"]] == [[root, "bob", "notes"]]
    page = await client.store.search_items([root, "alice"], limit=1, offset=1)
    assert len(page["items"]) == 1

    spaces = await client.store.list_namespaces(prefix=[root])
    assert sorted(spaces["namespaces"]) == [[root, "alice"], [root, "bob", "notes"]]
    shallow = await client.store.list_namespaces(prefix=[root], max_depth=2)
    assert sorted(shallow["namespaces"]) == [[root, "alice"], [root, "bob"]]

    await client.store.delete_item([root, "alice"], "k1")
    # As LangGraph's server answers: 200 and null, which the SDK returns as None.
    assert await client.store.get_item([root, "alice"], "k1") is None


async def test_bad_store_requests(client: LangGraphClient, server: str) -> None:
    with pytest.raises(UnprocessableEntityError, match="ttl"):
        await client.store.put_item(["a"], "k", {"v": 1}, ttl=5)
    with pytest.raises(UnprocessableEntityError, match="vector index"):
        await client.store.search_items(["a"], query="what did alice say")
    async with httpx.AsyncClient(base_url=server) as http:
        no_ns = await http.put("/store/items", json={"namespace": [], "key": "k", "value": {}})
        assert no_ns.status_code == 422
        assert "at least one label" in no_ns.json()["detail"]
        dotted = await http.put(
            "/store/items", json={"namespace": ["a.b"], "key": "k", "value": {}}
        )
        assert dotted.status_code == 422
        assert "'a.b'" in dotted.json()["detail"]
        not_object = await http.put(
            "/store/items", json={"namespace": ["a"], "key": "k", "value": 3}
        )
        assert not_object.status_code == 422
        assert not_object.json()["detail"][0]["loc"] == ["body", "value"]


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"a\x00b": 1}, "control character"),
        ({"": 1}, "1 to 255 characters"),
        ({"k": {"nested": 1}}, "a comparison is one of"),
        ({"k": {"$eq": {"deep": 1}}}, "must be a string, number"),
        ({"k": "\x1e"}, "control character"),
        ({"a b": 1}, "only letters, digits"),  # SQLite's store would raise: a 500
        ({"a'); --": 1}, "only letters, digits"),
    ],
)
async def test_a_search_filter_the_store_cannot_apply_is_refused(
    server: str, bad: dict[str, object], named: str
) -> None:
    async with httpx.AsyncClient(base_url=server) as http:
        answer = await http.post(
            "/store/items/search", json={"namespace_prefix": ["a"], "filter": bad}
        )
    assert answer.status_code == 422, answer.text
    assert named in answer.json()["detail"]


async def test_text_the_store_cannot_hold_is_refused(server: str) -> None:
    async with httpx.AsyncClient(base_url=server) as http:
        for answer in (
            await http.get("/store/items", params={"key": "a\x00b", "namespace": "a"}),
            await http.get("/store/items", params={"key": "k", "namespace": "a\x00"}),
            await http.put("/store/items", json={"namespace": ["a"], "key": "k\x00", "value": {}}),
            await http.put(
                "/store/items", json={"namespace": ["a"], "key": "k", "value": {"v": "x\x00"}}
            ),
        ):
            assert answer.status_code == 422, answer.text
            assert "NUL" in answer.json()["detail"] or "control" in answer.json()["detail"]


@pytest.fixture(params=["sqlite", "postgres"])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A run store whose store table holds an item written before tenants had roots."""
    with _store_url(request, request.param, tmp_path) as url:
        asyncio.run(put_item(url, ("notes", "old"), "k", {"written": "before roots"}))
        yield url


async def test_items_written_before_tenant_roots_belong_to_the_default_tenant(
    old_store: str, tmp_path: Path
) -> None:
    with serving(old_store, tmp_path) as process:
        default = get_client(url=process.base)
        item = await default.store.get_item(["notes", "old"], "k")
        assert (item["namespace"], item["value"]) == (["notes", "old"], {"written": "before roots"})
    assert prefixes(old_store) == [f"{tenant_store_root('')}.notes.old"]
    with serving(old_store, tmp_path) as again:  # adopting twice moves nothing twice
        item = await get_client(url=again.base).store.get_item(["notes", "old"], "k")
        assert item["namespace"] == ["notes", "old"]


async def test_graphs_get_the_store_the_api_serves(client: LangGraphClient) -> None:
    """A graph's ``store`` (async node) and ``get_store()`` (sync node) are the API's items."""
    user = f"u{uuid.uuid4().hex}"
    await client.store.put_item(["memories", user], "from-api", {"user": user})

    first = await client.runs.wait(None, "memory", input={"text": user, "n": 1}, raise_error=True)
    assert first["answer"] == ["from-api"]  # read through the node's store
    assert first["trace"] == ["recalled", "remembered"]
    stored = await client.store.get_item(["memories", user], "fact1")  # written by a sync node
    assert (stored["namespace"], stored["value"]) == (["memories", user], {"user": user})

    # Another thread of the same tenant sees what the first run stored.
    second = await client.runs.wait(None, "memory", input={"text": user, "n": 2})
    assert second["answer"] == ["fact1", "from-api"]
    spaces = await client.store.list_namespaces(prefix=["memories", user])
    assert spaces["namespaces"] == [["memories", user]]
