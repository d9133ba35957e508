"""Webhooks through the official SDK against a real ``tether serve``, both backends.

A project whose ``webhooks`` policy allows loopback sends each run's outcome to
a receiver on this machine; the test project (default policy) refuses it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import UnprocessableEntityError

from tests.server.conftest import PROJECT, _store_url, serving


class Receiver:
    """An HTTP endpoint that keeps every POST it is sent."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        received = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((self.path, dict(self.headers), json.loads(body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    async def for_run(self, run_id: str) -> tuple[str, dict[str, str], Any]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for post in self.posts:
                if post[2].get("run_id") == run_id:
                    return post
            await asyncio.sleep(0.05)
        raise AssertionError(f"no webhook for run {run_id}; got {self.posts}")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    yield found
    found.server.shutdown()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hooked(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A server for a copy of the test project whose policy allows loopback webhooks."""
    workdir = tmp_path_factory.mktemp("hooked")
    shutil.copy(PROJECT.parent / "agents.py", workdir / "agents.py")
    raw = json.loads(PROJECT.read_text())
    raw.pop("http")
    raw["webhooks"] = {
        "url": {"disable_loopback": False},
        "headers": {"X-Hook-Token": "${{ env.HOOK_TOKEN }}"},
    }
    project = workdir / "langgraph.json"
    project.write_text(json.dumps(raw))
    env = {"HOOK_TOKEN": "t0k"}
    with (
        _store_url(request, request.param, workdir) as url,
        serving(url, workdir, project=project, env=env) as process,
    ):
        yield process.base


async def test_a_finished_run_is_posted_with_its_values(hooked: str, receiver: Receiver) -> None:
    client = get_client(url=hooked)
    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"], "echo", input={"text": "hi"}, webhook=f"{receiver.url}/done?x=1"
    )
    path, headers, body = await receiver.for_run(run["run_id"])
    assert path == "/done?x=1"
    assert headers["X-Hook-Token"] == "t0k"
    assert body["status"] == "success"
    assert body["thread_id"] == thread["thread_id"]
    assert body["values"]["trace"] == ["a", "b", "c"]
    assert body["kwargs"]["webhook"] == f"{receiver.url}/done?x=1"
    assert body["run_started_at"] <= body["run_ended_at"] <= body["webhook_sent_at"]
    assert "error" not in body


async def test_an_interrupted_and_a_failed_run_are_posted(hooked: str, receiver: Receiver) -> None:
    client = get_client(url=hooked)
    thread = await client.threads.create()
    asked = await client.runs.create(
        thread["thread_id"], "ask", input={"text": "box"}, webhook=receiver.url
    )
    _, _, body = await receiver.for_run(asked["run_id"])
    assert body["status"] == "success"  # as LangGraph shows a run stopped at an interrupt
    assert body["values"]["trace"] == ["before"]
    resumed = await client.runs.create(
        thread["thread_id"], "ask", command={"resume": "yes"}, webhook=receiver.url
    )
    _, _, body = await receiver.for_run(resumed["run_id"])
    assert body["values"]["answer"] == "yes"
    failed = await client.runs.create(None, "boom", input={"text": "x"}, webhook=receiver.url)
    _, _, body = await receiver.for_run(failed["run_id"])
    assert body["status"] == "error"
    assert "boom: cannot handle 'x'" in json.dumps(body["error"])


async def test_a_stateless_wait_posts_too(hooked: str, receiver: Receiver) -> None:
    client = get_client(url=hooked)
    tag = str(uuid.uuid4())
    await client.runs.wait(None, "echo", input={"text": tag}, webhook=receiver.url)
    deadline = time.monotonic() + 30
    while not any((p[2]["values"] or {}).get("text") == tag for p in receiver.posts):
        assert time.monotonic() < deadline, receiver.posts
        await asyncio.sleep(0.05)


async def test_refused_webhooks_create_nothing(
    hooked: str, server: str, receiver: Receiver
) -> None:
    """The test project's default policy refuses loopback; some URLs every policy refuses."""
    for base, url, problem in [
        (server, receiver.url, "loopback"),
        (hooked, "http://169.254.169.254/latest/meta-data", "link-local"),
        (hooked, "/threads", "absolute http(s) URL"),
        (hooked, "http://user:pw@127.0.0.1/", "credentials"),
        (hooked, "http://no-such-host.invalid/", "does not resolve"),
    ]:
        client = get_client(url=base)
        thread = await client.threads.create()
        with pytest.raises(UnprocessableEntityError) as caught:
            await client.runs.create(thread["thread_id"], "echo", input={}, webhook=url)
        assert problem in str(caught.value.body), (url, caught.value.body)
        assert await client.runs.list(thread["thread_id"]) == []
        with pytest.raises(UnprocessableEntityError):
            await client.crons.create_for_thread(
                thread["thread_id"], "echo", schedule="0 9 * * *", webhook=url
            )
        assert await client.crons.search(thread_id=thread["thread_id"]) == []


async def test_the_runs_a_cron_creates_post_to_its_webhook(hooked: str, receiver: Receiver) -> None:
    client = get_client(url=hooked)
    thread = await client.threads.create()
    path = f"/cron/{thread['thread_id']}"
    cron: dict[str, Any] = dict(
        await client.crons.create_for_thread(
            thread["thread_id"],
            "echo",
            schedule="* * * * * *",
            input={"text": "tick"},
            webhook=f"{receiver.url}{path}",
        )
    )
    try:
        assert cron["payload"]["webhook"] == f"{receiver.url}{path}"
        deadline = time.monotonic() + 30
        while not any(p[0] == path for p in receiver.posts):
            assert time.monotonic() < deadline, receiver.posts
            await asyncio.sleep(0.05)
    finally:
        await client.crons.delete(cron["cron_id"])
    post = next(p for p in receiver.posts if p[0] == path)
    assert post[2]["thread_id"] == thread["thread_id"]
    assert post[2]["metadata"]["cron_id"] == cron["cron_id"]
