"""A project's ``auth.path`` (``langgraph_sdk.Auth``) on a real ``tether serve``.

The project in ``authproject/`` authenticates by the ``x-user`` header, makes
everything a user creates theirs (an ``owner`` metadata filter from a global
``@auth.on`` handler), lets only admins delete threads, and puts one user in a
tenant of its own.
"""

from __future__ import annotations

import json
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
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.server.conftest import ServeProcess, _store_url

PROJECT = Path(__file__).parent / "authproject" / "langgraph.json"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("custom-auth")
    with _store_url(request, request.param, workdir) as url:
        process = ServeProcess(url, workdir, project=PROJECT, auth=())
        try:
            yield process.start()
        finally:
            process.stop()


def as_user(base: str, name: str) -> LangGraphClient:
    return get_client(url=base, api_key=None, headers={"x-user": name})


async def status_of(call: Any) -> int:
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await call
    return failed.value.response.status_code


async def test_the_authenticate_handler_decides_who_gets_in(base: str) -> None:
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/ok")).status_code == 200
        nobody = await http.post("/threads/search", json={})
        assert nobody.status_code == 401
        assert nobody.json() == {"detail": "who is ''?"}
        for name in (b"mallory", "é☃".encode() * 3000, b"\xff\xfe", b"alice\xc3"):
            answer = await http.post("/threads/search", json={}, headers={"x-user": name})
            assert answer.status_code == 401, name[:20]
        broken = await http.post("/threads/search", json={}, headers={"x-user": "boom"})
        assert broken.status_code == 500
        assert broken.json() == {
            "detail": "the authenticate handler failed (RuntimeError); see the server log"
        }
        assert "identity provider" not in broken.text
        ok = await http.post("/threads/search", json={}, headers={"x-user": "alice"})
        assert ok.status_code == 200


async def test_owner_filters_keep_users_apart(base: str) -> None:
    alice, bob = as_user(base, "alice"), as_user(base, "bob")
    # the handler sets the owner, whatever the caller sends
    thread = await alice.threads.create(metadata={"owner": "bob", "topic": "x"})
    thread_id = thread["thread_id"]
    assert thread["metadata"] == {"owner": "alice", "topic": "x"}
    run = await alice.runs.create(thread_id, "echo", input={})
    await alice.runs.join(thread_id, run["run_id"])
    assert (await alice.threads.get_state(thread_id))["values"]["trace"] == ["a", "b", "c"]

    for call in (
        bob.threads.get(thread_id),
        bob.threads.get_state(thread_id),
        bob.threads.get_history(thread_id),
        bob.runs.get(thread_id, run["run_id"]),
        bob.runs.list(thread_id),
        bob.runs.join(thread_id, run["run_id"]),
        bob.runs.create(thread_id, "echo", input={}),
    ):
        assert await status_of(call) == 404
    assert thread_id not in {t["thread_id"] for t in await bob.threads.search(limit=1000)}
    assert await bob.threads.count(metadata={"topic": "x"}) == 0
    assert thread_id in {t["thread_id"] for t in await alice.threads.search(limit=1000)}
    # bob's search for alice's threads by owner finds nothing
    assert await bob.threads.search(metadata={"owner": "alice"}) == []

    # a run that creates its thread makes it its caller's
    made = f"made-by-run-{uuid4()}"
    done = await alice.runs.wait(made, "echo", input={}, if_not_exists="create")
    assert done["trace"] == ["a", "b", "c"]
    assert (await alice.threads.get(made))["metadata"]["owner"] == "alice"
    assert await status_of(bob.threads.get(made)) == 404

    # stateless runs work for their caller
    assert (await bob.runs.wait(None, "echo", input={}))["trace"] == ["a", "b", "c"]

    # an id alice uses cannot be taken over by bob
    assert await status_of(bob.threads.create(thread_id=thread_id, if_exists="do_nothing")) == 409


async def test_a_thread_made_with_supersteps_is_its_makers(base: str) -> None:
    """Supersteps go through the same ``threads.create`` handler (which sets the owner) and
    then ``threads.update``; another user's retry of the same id changes nothing."""
    alice, bob = as_user(base, "alice"), as_user(base, "bob")
    tid = str(uuid4())
    supersteps = [{"updates": [{"values": {"trace": ["a"]}, "as_node": "a"}]}]
    made = await alice.threads.create(thread_id=tid, graph_id="echo", supersteps=supersteps)
    assert made["metadata"]["owner"] == "alice"
    assert (await alice.threads.get_state(tid))["values"] == {"trace": ["a"]}
    assert await status_of(bob.threads.get_state(tid)) == 404
    assert (
        await status_of(
            bob.threads.create(
                thread_id=tid, graph_id="echo", supersteps=supersteps, if_exists="do_nothing"
            )
        )
        == 409
    )
    assert len(await alice.threads.get_history(tid)) == 1


async def test_owner_filters_cover_edits_copies_and_run_deletes(base: str) -> None:
    alice, bob = as_user(base, "alice"), as_user(base, "bob")
    thread = await alice.threads.create(metadata={"topic": "edits"})
    thread_id = thread["thread_id"]
    run = await alice.runs.create(thread_id, "echo", input={})
    await alice.runs.join(thread_id, run["run_id"])
    for call in (
        bob.threads.update(thread_id, metadata={"owner": "bob"}),
        bob.threads.update_state(thread_id, {"trace": ["x"]}),
        bob.threads.copy(thread_id),
        bob.runs.delete(thread_id, run["run_id"]),
    ):
        assert await status_of(call) == 404
    kept = (await alice.threads.get(thread_id))["metadata"]
    assert {k: kept[k] for k in ("owner", "topic", "graph_id")} == {
        "owner": "alice",
        "topic": "edits",
        "graph_id": "echo",  # the run marks its thread, as LangGraph's server does
    }
    assert (await alice.runs.get(thread_id, run["run_id"]))["run_id"] == run["run_id"]
    # the owner's own edits pass, and the handler keeps the owner whatever is sent
    updated = await alice.threads.update(thread_id, metadata={"owner": "bob", "n": 1})
    assert updated["metadata"]["owner"] == "alice"


async def test_a_handler_returning_false_is_403(base: str) -> None:
    alice, root = as_user(base, "alice"), as_user(base, "root")
    thread = await alice.threads.create()
    assert await status_of(alice.threads.delete(thread["thread_id"])) == 403
    assert (await alice.threads.get(thread["thread_id"]))["thread_id"] == thread["thread_id"]
    await root.threads.delete(thread["thread_id"])  # the admin's handler returns True
    assert await status_of(alice.threads.get(thread["thread_id"])) == 404


async def test_a_users_tenant_field_scopes_it(base: str) -> None:
    tina, root = as_user(base, "tina"), as_user(base, "root")
    thread = await tina.threads.create()
    assert (await tina.threads.get(thread["thread_id"]))["metadata"] == {"owner": "tina"}
    # root may delete any thread of its own tenant, not one of another tenant
    assert await status_of(root.threads.delete(thread["thread_id"])) == 404
    assert (await tina.threads.get(thread["thread_id"]))["thread_id"] == thread["thread_id"]


async def test_created_assistants_are_their_owners(base: str) -> None:
    alice, bob = as_user(base, "alice"), as_user(base, "bob")
    made = await alice.assistants.create("echo", name="mine")
    assert made["metadata"]["owner"] == "alice"
    assert (await bob.assistants.get("echo"))["graph_id"] == "echo"  # shared system ones
    searched = await alice.assistants.search(limit=100)
    assert made["assistant_id"] in {a["assistant_id"] for a in searched}


async def test_custom_routes_are_authenticated_when_the_project_asks(base: str) -> None:
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/whoami")).status_code == 401
        me = await http.get("/whoami", headers={"x-user": "alice"})
        assert me.json() == {"identity": "alice", "permissions": ["approver"], "body": None}


async def test_custom_websockets_are_authenticated_when_the_project_asks(base: str) -> None:
    socket_url = "ws" + base.removeprefix("http") + "/whoami/socket"
    for headers in ({}, {"x-user": "mallory"}, {"x-user": "boom"}):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(socket_url, additional_headers=headers):
                pass
        assert refused.value.response.status_code == 403, headers
    async with connect(socket_url, additional_headers={"x-user": "alice"}) as socket:
        assert json.loads(await socket.recv()) == {"identity": "alice"}


async def test_the_handler_gets_the_body_and_path_params(base: str) -> None:
    async with httpx.AsyncClient(base_url=base) as http:
        # the handler read the body, and the route still gets all of it
        signed = {"signature": "ok", "text": "é" * 50_000}
        me = await http.post("/whoami", json=signed, headers={"x-user": "signed"})
        assert me.status_code == 200, me.text
        assert me.json() == {"identity": "signed-body", "permissions": [], "body": signed}
        signer = {"x-user": "signed"}
        unsigned = await http.post("/whoami", json={"signature": "no"}, headers=signer)
        assert unsigned.status_code == 401
        blocked = await http.get("/threads/blocked-by-auth", headers={"x-user": "alice"})
        assert blocked.status_code == 403
        assert blocked.json() == {"detail": "GET /threads/blocked-by-auth is blocked"}
    # the API's own routes get the body after the handler read it
    thread = await as_user(base, "alice").threads.create(metadata={"big": "x" * 100_000})
    assert len(thread["metadata"]["big"]) == 100_000


def test_an_auth_path_that_is_not_an_auth_object_is_named(tmp_path: Path) -> None:
    agents = Path(__file__).parent / "project" / "agents.py"
    (tmp_path / "auth.py").write_text("auth = 42\n")
    (tmp_path / "langgraph.json").write_text(
        json.dumps({"graphs": {"echo": f"{agents}:echo"}, "auth": {"path": "./auth.py:auth"}})
    )
    done = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--config", str(tmp_path / "langgraph.json")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "auth.path" in done.stderr
    assert "expected a langgraph_sdk.Auth object, got int" in done.stderr
    assert "Traceback" not in done.stderr


async def test_the_step_log_route_is_scoped_like_the_thread(base: str) -> None:
    alice, bob, tina = as_user(base, "alice"), as_user(base, "bob"), as_user(base, "tina")
    thread_id = (await alice.threads.create())["thread_id"]
    await alice.runs.wait(thread_id, "echo", input={})
    assert await alice.http.get(f"/threads/{thread_id}/steps") == {"steps": []}
    assert (await alice.http.post(f"/threads/{thread_id}/replay", json={}))["divergence"] is None
    for other in (bob, tina):
        assert await status_of(other.http.get(f"/threads/{thread_id}/steps")) == 404
        assert await status_of(other.http.post(f"/threads/{thread_id}/replay", json={})) == 404
    # replaying runs the graph's code: reading the thread is not enough
    viewer = as_user(base, "alice-viewer")
    assert await viewer.http.get(f"/threads/{thread_id}/steps") == {"steps": []}
    assert await status_of(viewer.http.post(f"/threads/{thread_id}/replay", json={})) == 403
    assert await status_of(viewer.runs.create(thread_id, "echo", input={})) == 403
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get(f"/threads/{thread_id}/steps")).status_code == 401


async def test_fork_and_what_if_are_scoped_like_a_run(base: str) -> None:
    alice, bob, tina = as_user(base, "alice"), as_user(base, "bob"), as_user(base, "tina")
    thread_id = (await alice.threads.create(metadata={"topic": "x"}))["thread_id"]
    await alice.runs.wait(thread_id, "echo", input={})
    fork, what_if = f"/threads/{thread_id}/fork", f"/threads/{thread_id}/what_if"
    # another user's or another tenant's thread is missing, whatever the body says
    for other in (bob, tina):
        assert await status_of(other.http.post(fork, json={"step": 0})) == 404
        assert await status_of(other.http.post(what_if, json={"step": 0, "output": "x"})) == 404
    # a fork copies what its caller may read into a thread the caller creates (and owns)
    first = (await alice.threads.get_history(thread_id, limit=100))[-1]["checkpoint"]
    forked = await alice.http.post(fork, json={"checkpoint_id": first["checkpoint_id"]})
    assert forked["metadata"]["owner"] == "alice"
    assert forked["metadata"]["branched_from"] == thread_id
    assert await status_of(bob.threads.get(forked["thread_id"])) == 404
    # a fork that fails halfway is undone, though its caller may not delete threads
    bad = {"checkpoint_id": first["checkpoint_id"], "as_node": "nope", "thread_id": f"h-{uuid4()}"}
    assert await status_of(alice.http.post(fork, json=bad)) == 400
    for anyone in (alice, as_user(base, "root")):
        assert await status_of(anyone.threads.get(bad["thread_id"])) == 404
    # a what-if runs the graph's code: reading the thread is not enough
    viewer = as_user(base, "alice-viewer")
    assert await status_of(viewer.http.post(what_if, json={"step": 0, "output": "x"})) == 403
    # alice may; the echo graph records no steps, so there is no step 0 to replace
    refused = alice.http.post(what_if, json={"step": 0, "output": "x"})
    assert await status_of(refused) == 422


async def test_the_store_handler_scopes_each_users_items(base: str) -> None:
    alice, bob = as_user(base, "alice"), as_user(base, "bob")
    ns = [f"n{uuid4().hex}"]
    await alice.store.put_item(ns, "k", {"who": "alice"})
    item = await alice.store.get_item(ns, "k")
    # The handler put alice's identity in front, as LangGraph's server shows it.
    assert (item["namespace"], item["value"]) == (["alice", *ns], {"who": "alice"})
    assert await bob.store.get_item(ns, "k") is None
    assert (await bob.store.search_items(ns))["items"] == []
    spaces = (await alice.store.list_namespaces())["namespaces"]
    assert ["alice", *ns] in spaces
    assert all(space[0] == "alice" for space in spaces), spaces
    assert await status_of(alice.store.put_item(["locked"], "k", {"v": 1})) == 403
    await bob.store.delete_item(ns, "k")  # bob's namespace: alice's item stays
    assert (await alice.store.get_item(ns, "k"))["value"] == {"who": "alice"}


async def test_a_refused_state_update_or_prune_changes_nothing(base: str) -> None:
    """The ``threads.update`` handler is asked before a state edit or a prune writes."""
    alice, viewer = as_user(base, "alice"), as_user(base, "alice-viewer")
    thread_id = (await alice.threads.create())["thread_id"]
    for _ in range(2):
        await alice.runs.wait(thread_id, "echo", input={})
    before = await alice.threads.get_state(thread_id)
    history = len(await alice.threads.get_history(thread_id, limit=100))
    edit = viewer.threads.update_state(thread_id, {"text": "PWNED"}, as_node="a")
    assert await status_of(edit) == 403
    assert (await alice.threads.get_state(thread_id))["values"] == before["values"]
    prune = viewer.http.post(
        "/threads/prune", json={"thread_ids": [thread_id], "strategy": "keep_latest"}
    )
    assert await status_of(prune) == 403
    assert len(await alice.threads.get_history(thread_id, limit=100)) == history > 1
