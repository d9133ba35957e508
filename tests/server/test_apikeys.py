"""API keys and tenants: a real ``tether serve`` with keys of two tenants, the official SDK.

Without a valid key nothing but ``/ok`` and ``/info`` answers (401); a caller of
tenant B finds none of tenant A's assistants, threads or runs: every read, stream,
cancel and delete of them is a 404, and searches never show them.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, UnprocessableEntityError

from tests.server.conftest import PROJECT, ServeProcess, _store_url


def apikeys(url: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", "apikeys", *args, "--url", url],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def new_key(url: str, user: str, tenant: str, cwd: Path, *roles: str) -> str:
    role_args = [a for r in roles for a in ("--role", r)]
    done = apikeys(url, "create", "--user", user, "--tenant", tenant, *role_args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class Keyed:
    """A served run store with keys for alice (tenant A) and bob (tenant B)."""

    def __init__(self, base: str, url: str, workdir: Path, alice: str, bob: str) -> None:
        self.base, self.url, self.workdir = base, url, workdir
        self.alice, self.bob = alice, bob

    def client(self, key: str | None) -> LangGraphClient:
        return get_client(url=self.base, api_key=key)  # the SDK sends it as x-api-key


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def keyed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Keyed]:
    workdir = tmp_path_factory.mktemp("keys")
    with _store_url(request, request.param, workdir) as url:
        alice = new_key(url, "alice", "A", workdir, "approver")
        bob = new_key(url, "bob", "B", workdir)
        process = ServeProcess(url, workdir, auth=())
        try:
            process.start()
            yield Keyed(process.base, url, workdir, alice, bob)
        finally:
            process.stop()


async def test_no_key_or_a_wrong_key_is_401(keyed: Keyed) -> None:
    async with httpx.AsyncClient(base_url=keyed.base) as http:
        assert (await http.get("/ok")).status_code == 200
        missing = await http.post("/threads/search", json={})
        assert missing.status_code == 401
        assert "x-api-key" in missing.json()["detail"]
        assert missing.headers["www-authenticate"] == "Bearer"
        for headers in (
            {"x-api-key": "nope"},
            {"x-api-key": keyed.alice[:-1] + ("A" if keyed.alice[-1] != "A" else "B")},
            {"authorization": "Bearer " + keyed.alice + "x"},
            {"authorization": "Basic " + keyed.alice},
        ):
            wrong = await http.post("/threads/search", json={}, headers=headers)
            assert wrong.status_code == 401, headers
            assert wrong.json() == {"detail": "invalid or revoked API key"} or (
                "missing API key" in wrong.json()["detail"]
            )
        # a route that does not exist is no way to probe past authentication
        assert (await http.get("/no/such/route")).status_code == 401
        # either header carries the key
        for headers in ({"x-api-key": keyed.alice}, {"authorization": f"Bearer {keyed.alice}"}):
            assert (await http.post("/threads/search", json={}, headers=headers)).status_code == 200
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await keyed.client(None).threads.search()
    assert refused.value.response.status_code == 401


async def test_hostile_headers_are_401_not_500(keyed: Keyed) -> None:
    hostile: list[dict[str, bytes]] = [
        {"x-api-key": b"k" * 8000},
        {"x-api-key": "é☃𝄞".encode()},
        {"x-api-key": b"\xff\xfe\xfd"},
        {"authorization": b"Bearer " + "tk_é".encode() * 500},
        {"authorization": b"Bearer"},
        {"authorization": b"Bearer  \t x"},
        {"x-api-key": b"tk_000000000000_" + b"a" * 43},
        {"x-api-key": b"tk_' OR 1=1 --_" + b"a" * 43},
    ]
    async with httpx.AsyncClient(base_url=keyed.base) as http:
        for headers in hostile:
            answer = await http.post("/threads/search", json={}, headers=headers)
            assert answer.status_code == 401, (headers, answer.text)


async def test_a_revoked_key_is_refused_from_the_next_request(keyed: Keyed) -> None:
    key = new_key(keyed.url, "carol", "A", keyed.workdir)
    client = keyed.client(key)
    assert isinstance(await client.threads.search(), list)
    key_id = key.split("_")[1]
    listed = apikeys(keyed.url, "list", cwd=keyed.workdir)
    assert listed.returncode == 0
    assert key not in listed.stdout  # only the id is ever shown again
    assert f"{key_id}  user=carol  tenant='A'" in listed.stdout
    done = apikeys(keyed.url, "revoke", key_id, cwd=keyed.workdir)
    assert done.returncode == 0, done.stderr
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.threads.search()
    assert refused.value.response.status_code == 401
    again = apikeys(keyed.url, "revoke", "000000000000", cwd=keyed.workdir)
    assert again.returncode == 1
    assert "no API key with id '000000000000'" in again.stderr


async def is_404(call: Any) -> None:
    """The call fails with 404 (the SDK raises its NotFoundError, or httpx's for joins)."""
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await call
    assert failed.value.response.status_code == 404


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


async def _a_world(a: LangGraphClient) -> dict[str, Any]:
    """Tenant A's assistant, thread and finished run, and an interrupted run."""
    assistant = await a.assistants.create("echo", name="a's echo", metadata={"team": "a"})
    thread = await a.threads.create(metadata={"owner": "a"})
    run = await a.runs.create(thread["thread_id"], assistant["assistant_id"], input={})
    await a.runs.join(thread["thread_id"], run["run_id"])
    asked = await a.threads.create()
    pending = await a.runs.create(asked["thread_id"], "ask", input={})
    await a.runs.join(asked["thread_id"], pending["run_id"])
    return {"assistant": assistant, "thread": thread, "run": run, "asked": asked, "ask": pending}


async def test_tenant_b_finds_nothing_of_tenant_a(keyed: Keyed) -> None:
    a, b = keyed.client(keyed.alice), keyed.client(keyed.bob)
    world = await _a_world(a)
    thread_id, run_id = world["thread"]["thread_id"], world["run"]["run_id"]
    asked_id, ask_run = world["asked"]["thread_id"], world["ask"]["run_id"]
    assistant_id = world["assistant"]["assistant_id"]

    missing = [
        b.assistants.get(assistant_id),
        b.threads.get(thread_id),
        b.threads.get_state(thread_id),
        b.threads.get_history(thread_id),
        b.runs.get(thread_id, run_id),
        b.runs.list(thread_id),
        b.runs.join(thread_id, run_id),
        b.runs.cancel(asked_id, ask_run),
        b.runs.create(thread_id, "echo", input={}),
        b.runs.create(asked_id, "ask", command={"resume": "from b"}),
        b.runs.create(thread_id, assistant_id, input={}),
        b.threads.delete(thread_id),
        b.threads.delete(asked_id),
    ]
    for call in missing:
        await is_404(call)
    await is_404(_drain(b.runs.join_stream(thread_id, run_id)))
    await is_404(_drain(b.runs.stream(thread_id, "echo", input={})))
    history = await a.threads.get_history(thread_id)
    fork_from = history[-1]["checkpoint"]["checkpoint_id"]
    await is_404(b.runs.create(thread_id, "echo", input={}, checkpoint_id=fork_from))
    await is_404(b.runs.create(None, assistant_id, input={}))  # a's assistant, stateless
    async with httpx.AsyncClient(base_url=keyed.base, headers={"x-api-key": keyed.bob}) as http:
        post = await http.post(f"/threads/{thread_id}/state/checkpoint", json={"checkpoint": {}})
        assert post.status_code == 404
        cancel_many = await http.post(
            "/runs/cancel", json={"thread_id": asked_id, "run_ids": [ask_run]}
        )
        assert cancel_many.status_code == 404

    # searches and counts never show a's objects
    b_threads = await b.threads.search(limit=1000)
    assert not {thread_id, asked_id} & {t["thread_id"] for t in b_threads}
    assert await b.threads.search(ids=[thread_id, asked_id]) == []
    assert await b.threads.count(metadata={"owner": "a"}) == 0
    b_assistants = await b.assistants.search(limit=1000)
    assert assistant_id not in {x["assistant_id"] for x in b_assistants}
    assert {x["metadata"].get("created_by") for x in b_assistants} == {"system"}
    await b.runs.cancel_many(status="all")  # cancels none of a's runs

    # an id a uses cannot be taken by b (the answer names no owner)
    with pytest.raises(ConflictError):
        await b.threads.create(thread_id=thread_id)

    # and a still has everything, untouched
    assert (await a.threads.get(thread_id))["metadata"]["owner"] == "a"
    assert (await a.runs.get(thread_id, run_id))["status"] == "success"
    assert (await a.threads.get(asked_id))["status"] == "interrupted"  # not cancelled by b
    assert (await a.assistants.get(assistant_id))["name"] == "a's echo"
    assert thread_id in {t["thread_id"] for t in await a.threads.search(limit=1000)}
    assert (await a.threads.get_state(thread_id))["values"]["trace"] == ["a", "b", "c"]


async def test_each_tenant_runs_its_own_threads(keyed: Keyed) -> None:
    b = keyed.client(keyed.bob)
    thread = await b.threads.create()
    done = await b.runs.wait(thread["thread_id"], "echo", input={})
    assert done["trace"] == ["a", "b", "c"]
    parts = [p async for p in b.runs.stream(None, "echo", input={}, stream_mode="values")]
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["trace"] == ["a", "b", "c"]
    a_threads = await keyed.client(keyed.alice).threads.search(limit=1000)
    assert thread["thread_id"] not in {t["thread_id"] for t in a_threads}


async def test_the_default_tenant_shares_nothing_but_the_graphs(keyed: Keyed) -> None:
    """A key of the default tenant ``""`` is a tenant like any other.

    Its assistants are its own; it cannot take a graph's id for an assistant (which
    would capture every tenant's runs naming the graph), nor change the graph's
    system assistant, which every tenant runs.
    """
    root = keyed.client(new_key(keyed.url, "root", "", keyed.workdir))
    b = keyed.client(keyed.bob)
    secret = await root.assistants.create(
        "echo", name="root's", config={"configurable": {"api_key": "s3cret"}}
    )
    await is_404(b.assistants.get(secret["assistant_id"]))
    await is_404(b.runs.wait(None, secret["assistant_id"], input={}))
    searched = await b.assistants.search(limit=1000)
    assert secret["assistant_id"] not in {x["assistant_id"] for x in searched}
    assert await b.assistants.count() == len(searched)

    for caller in (root, b):
        with pytest.raises(UnprocessableEntityError, match="'echo' is the id of graph"):
            await caller.assistants.create("echo", assistant_id="echo")
        with pytest.raises(UnprocessableEntityError, match="'echo' is the id of graph"):
            await caller.assistants.create("ask", assistant_id="echo", if_exists="do_nothing")
    system = await root.assistants.get("echo")
    assert system["metadata"] == {"created_by": "system"}
    for caller in (root, b):
        with pytest.raises(UnprocessableEntityError, match="cannot be updated"):
            await caller.assistants.update(system["assistant_id"], config={"recursion_limit": 1})
        with pytest.raises(UnprocessableEntityError, match="cannot be deleted"):
            await caller.assistants.delete(system["assistant_id"])
    assert (await b.assistants.get("echo")) == system  # unchanged
    done = await b.runs.wait(None, "echo", input={})
    assert done["trace"] == ["a", "b", "c"]


def test_serve_refuses_to_start_without_any_authentication(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--config", str(PROJECT), "--url", url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "tether apikeys create" in done.stderr
    assert "--no-auth" in done.stderr
    assert "Traceback" not in done.stderr


def test_apikeys_create_refuses_a_bad_tenant(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    done = apikeys(url, "create", "--user", "u", "--tenant", "a\x01" + "x" * 300, cwd=tmp_path)
    assert done.returncode == 1
    assert "tenant" in done.stderr
    assert "Traceback" not in done.stderr


async def test_keys_that_cannot_be_checked_are_a_503_not_a_crash(tmp_path: Path) -> None:
    db = tmp_path / "runtime.db"
    url = f"sqlite:///{db}"
    key = new_key(url, "alice", "A", tmp_path)
    process = ServeProcess(url, tmp_path, auth=())
    try:
        process.start()
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TABLE tether_api_keys")
        async with httpx.AsyncClient(base_url=process.base) as http:
            answer = await http.post("/threads/search", json={}, headers={"x-api-key": key})
            assert answer.status_code == 503
            assert answer.json()["detail"] == (
                "authentication failed (OperationalError); see the server log"
            )
            assert (await http.get("/ok")).status_code == 200
    finally:
        process.stop()


async def test_each_tenant_has_its_own_store_items(keyed: Keyed) -> None:
    """alice (tenant A) and bob (tenant B) name the same namespace and key and never meet."""
    alice, bob = keyed.client(keyed.alice), keyed.client(keyed.bob)
    ns = [f"t{uuid4().hex}", "shared"]
    await alice.store.put_item(ns, "k", {"who": "alice"})
    assert await bob.store.get_item(ns, "k") is None  # as for an item that does not exist
    everything = (await bob.store.search_items([], limit=1000))["items"]
    assert [i for i in everything if i["value"] == {"who": "alice"}] == []
    assert (await bob.store.search_items([ns[0]]))["items"] == []
    assert (await bob.store.list_namespaces(prefix=[ns[0]]))["namespaces"] == []
    assert ns not in (await bob.store.list_namespaces(limit=1000))["namespaces"]

    await bob.store.put_item(ns, "k", {"who": "bob"})  # the same name: another item
    await bob.store.delete_item(ns, "k")  # bob's only
    item = await alice.store.get_item(ns, "k")
    assert (item["namespace"], item["value"]) == (ns, {"who": "alice"})
    found = (await alice.store.search_items([ns[0]]))["items"]
    assert [(i["namespace"], i["value"]) for i in found] == [(ns, {"who": "alice"})]
    shallow = await alice.store.list_namespaces(prefix=[ns[0]], max_depth=1)
    assert shallow["namespaces"] == [[ns[0]]]


async def test_another_tenant_s_approval_is_answered_as_one_that_does_not_exist(
    keyed: Keyed,
) -> None:
    """The 404 for tenant A's approval, asked by tenant B, said less than the 404 for an id
    nobody has: the difference told B the id exists. Both answers are now the same."""
    a = keyed.client(keyed.alice)
    thread = await a.threads.create()
    await a.runs.wait(thread["thread_id"], "gated", input={"text": "parcel"})
    state = await a.threads.get_state(thread["thread_id"])
    approval_id = state["tasks"][0]["interrupts"][0]["value"]["approval_id"]
    missing = "apr_" + "0" * len(approval_id.removeprefix("apr_"))
    async with httpx.AsyncClient(base_url=keyed.base, headers={"x-api-key": keyed.bob}) as http:
        foreign, unknown = (
            await http.get(f"/approvals/{approval_id}"),
            await http.get(f"/approvals/{missing}"),
        )
    assert (foreign.status_code, unknown.status_code) == (404, 404)
    assert foreign.json()["detail"].replace(approval_id, "ID") == unknown.json()["detail"].replace(
        missing, "ID"
    )
