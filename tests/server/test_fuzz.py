"""Property-based requests against a real ``tether serve``, generated from its ``/openapi.json``.

Every operation the document describes gets a bounded number of generated
requests (bodies, path ids, query strings); none may be answered with a 5xx,
and an answer the document describes must match its schema. Then a batch of
malformed run creations (against a graph that exists, so only the body is
wrong) must each be refused with a 4xx naming the problem, and create no run.

Some operations wait by design: a run's join, ``runs/wait``, the SSE streams (a
thread's join stream stays open for its next runs), a long-poll for events. Their
answer's status comes at once (a stream's first, or a wait's heartbeat, or a 4xx);
what follows is read for 0.3 s only, and checked against the schema when
it was complete by then, so no request waits out a run or a timeout. The events
long-poll is a plain JSON answer whose status comes only at its end, so its
generated ``wait`` is capped at 0.3 s (``tests/server/test_v1.py`` tests the wait).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from langgraph_sdk import get_client
from schemathesis.checks import not_a_server_error, response_schema_conformance

from tests.server.conftest import _store_url
from tests.server.inbox import DANA, PROJECT, approval_of, inbox_server, waiting_refund
from tether.runtime import Runtime
from tether.server import create_app

EXAMPLES = 25  # per operation; both backends take about a minute and a half


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def fuzzed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """``(base URL, run store URL)`` of a ``tether serve --no-auth`` shared by the module."""
    workdir: Path = tmp_path_factory.mktemp("fuzz")
    with _store_url(request, request.param, workdir) as url, inbox_server(url, workdir) as server:
        yield server.base, url


def _document() -> dict[str, Any]:
    """The OpenAPI document of the project's app (the one the server serves, see below)."""
    app = create_app(Runtime("sqlite:///:memory:"), PROJECT)  # not started: nothing opened
    document: dict[str, Any] = app.fastapi.openapi()
    return document


DOCUMENT = _document()
schema = schemathesis.openapi.from_dict(DOCUMENT)


def test_the_server_serves_this_document(fuzzed: tuple[str, str]) -> None:
    served = httpx.get(f"{fuzzed[0]}/openapi.json", timeout=30)
    assert served.status_code == 200
    assert served.json() == DOCUMENT


@pytest.fixture(scope="module")
def known(fuzzed: tuple[str, str]) -> dict[str, str]:
    """Ids that exist on the server: a thread whose run waits on an approval, its run and
    approval, the project's graph as an assistant, a cron, and a receipt id (unknown)."""

    async def seed() -> dict[str, str]:
        thread_id, run_id = await waiting_refund(get_client(url=fuzzed[0]), 900)
        async with httpx.AsyncClient(base_url=fuzzed[0], timeout=30) as http:
            approval = await approval_of(http, thread_id)
            state = (await http.get(f"/threads/{thread_id}/state")).json()
            cron = await http.post(
                "/runs/crons", json={"assistant_id": "refund", "schedule": "0 0 1 1 *"}
            )
            cron.raise_for_status()
        return {
            "cron_id": cron.json()["cron_id"],
            "thread_id": thread_id,
            "run_id": run_id,
            "approval_id": approval["approval_id"],
            "assistant_id": "refund",
            "checkpoint_id": state["checkpoint"]["checkpoint_id"],
            # no erasure has run on this server: the receipt route answers 404 for it
            "receipt_id": "no-such-receipt",
        }

    return asyncio.run(seed())


CHECKS = [not_a_server_error, response_schema_conformance]
WAITING = {  # operations whose answer may take as long as a run, or never end
    ("POST", "/threads/{thread_id}/runs/wait"),
    ("POST", "/runs/wait"),
    ("POST", "/threads/{thread_id}/runs/stream"),
    ("POST", "/runs/stream"),
    ("GET", "/threads/{thread_id}/runs/{run_id}/join"),
    ("GET", "/threads/{thread_id}/runs/{run_id}/stream"),
    ("GET", "/threads/{thread_id}/stream"),
    ("POST", "/threads/{thread_id}/runs/{run_id}/cancel"),
    ("GET", "/v1/runs/{run_id}/events"),
}
PATIENCE = 0.3  # seconds a waiting operation's body is read for
LONG_POLL = ("GET", "/v1/runs/{run_id}/events")


async def _bounded(sent: dict[str, Any]) -> tuple[httpx.Response, bool]:
    """Send a request as schemathesis would; read its body for ``PATIENCE`` seconds.
    Returns the response and whether its body was complete by then."""
    body: dict[str, Any] = {}
    if "json" in sent:
        body["json"] = sent["json"]
    elif sent.get("data") is not None:
        body["data" if isinstance(sent["data"], dict) else "content"] = sent["data"]
    async with httpx.AsyncClient(timeout=60, cookies=sent.get("cookies")) as http:
        request = http.build_request(
            sent["method"],
            sent["url"],
            params=sent.get("params"),
            headers=sent.get("headers"),
            **body,
        )
        response = await http.send(request, stream=True)
        try:
            await asyncio.wait_for(response.aread(), PATIENCE)
        except TimeoutError:
            return response, False
        finally:
            await response.aclose()
        return response, True


def _check(case: Any, base: str) -> None:
    """The case's answer is no 5xx and matches the document (the approvals routes act
    for a user). A waiting operation's answer is read for 0.3 s only."""
    wait = (case.query or {}).get("wait")
    if (case.method.upper(), case.path) == LONG_POLL and isinstance(wait, int | float):
        case.query["wait"] = min(wait, PATIENCE)
    if (case.method.upper(), case.path) not in WAITING:
        case.call_and_validate(base_url=base, headers=DANA, checks=CHECKS, timeout=60)
        return
    response, complete = asyncio.run(_bounded(case.as_transport_kwargs(base, DANA)))
    assert response.status_code < 500, (case.method, case.formatted_path, response.status_code)
    if complete:
        case.validate_response(response, checks=CHECKS)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same requests on every run, nothing stored between runs
    database=None,
)
def test_no_request_is_a_server_error(
    case: Any, fuzzed: tuple[str, str], known: dict[str, str]
) -> None:
    """Each generated request as generated (its ids mostly unknown), then, for a path with
    ids, again with ids that exist, so that the body reaches what lies behind them (not for
    a deletion: the other operations need them)."""
    _check(case, fuzzed[0])
    existing = {k: v for k, v in known.items() if k in case.path_parameters}
    if existing and case.method != "DELETE":
        case.path_parameters.update(existing)
        _check(case, fuzzed[0])


# A graph the project has, so each body is refused for what is wrong in it, not for its
# assistant; each entry names the field the refusal must name.
MALFORMED: list[tuple[Any, str]] = [
    ({}, "assistant_id"),
    ([], "body"),
    ("refund", "body"),
    ({"assistant_id": 7}, "assistant_id"),
    ({"assistant_id": "refund", "input": {}, "stream_mode": "bogus"}, "bogus"),
    ({"assistant_id": "refund", "stream_mode": 3}, "stream_mode"),
    ({"assistant_id": "refund", "multitask_strategy": "bogus"}, "multitask_strategy"),
    ({"assistant_id": "refund", "if_not_exists": "bogus"}, "if_not_exists"),
    ({"assistant_id": "refund", "on_completion": "bogus"}, "on_completion"),
    ({"assistant_id": "refund", "on_disconnect": "bogus"}, "on_disconnect"),
    ({"assistant_id": "refund", "durability": "bogus"}, "durability"),
    ({"assistant_id": "refund", "after_seconds": "soon"}, "after_seconds"),
    ({"assistant_id": "refund", "after_seconds": -5}, "after_seconds"),
    ({"assistant_id": "refund", "config": []}, "config"),
    ({"assistant_id": "refund", "metadata": "x"}, "metadata"),
    ({"assistant_id": "refund", "command": 1}, "command"),
    ({"assistant_id": "refund", "interrupt_before": 5}, "interrupt_before"),
    ({"assistant_id": "refund", "webhook": "http://example.com/hook"}, "webhook"),
    ({"assistant_id": "refund", "input": {}, "command": {"resume": 1}}, "command"),
]
ROUTES = ["/runs", "/runs/wait", "/runs/stream", "/threads/{thread}/runs"]


async def _count_runs(url: str) -> int:
    async with Runtime(url) as runtime:
        total, page = 0, 1000
        while True:
            found = await runtime.list(limit=page, offset=total)
            total += len(found)
            if len(found) < page:
                return total


async def test_malformed_run_creations_create_nothing(fuzzed: tuple[str, str]) -> None:
    base, url = fuzzed
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        thread = (await http.post("/threads", json={"metadata": {"graph_id": "refund"}})).json()
        before = await _count_runs(url)
        for route in ROUTES:
            path = route.format(thread=thread["thread_id"])
            for body, field in MALFORMED:
                answer = await http.post(path, json=body)
                assert 400 <= answer.status_code < 500, (path, body, answer.text)
                assert field in answer.text, (path, body, answer.text)
            batch = await http.post("/runs/batch", json=[{"assistant_id": "refund"}, {}])
            assert batch.status_code == 422, batch.text
        # A batch whose second run is refused creates neither (the first was created and
        # queued), and the refusal says which run it was.
        for body, field in [
            *[(b, f) for b, f in MALFORMED if isinstance(b, dict) and "assistant_id" in b],
            ({"assistant_id": "no_such_graph"}, "no_such_graph"),
            (
                {"assistant_id": "refund", "config": {"configurable": {"__pregel_x": 1}}},
                "__pregel_x",
            ),
            ({"assistant_id": "refund", "multitask_strategy": "ROLLBACK"}, "multitask_strategy"),
            ({"assistant_id": "refund", "metadata": {"tether_compensates": "x"}}, "tether_"),
        ]:
            batch = await http.post("/runs/batch", json=[{"assistant_id": "refund"}, body])
            assert 400 <= batch.status_code < 500, (body, batch.text)
            assert field in batch.text, (body, batch.text)
            detail = batch.json()["detail"]
            named = "runs[1]" in detail if isinstance(detail, str) else detail[0]["loc"][1] == 1
            assert named, (body, batch.text)
        assert await _count_runs(url) == before


_DEEP = b'{"a": ' * 150 + b"1" + b"}" * 150


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/threads", b'{"metadata": {"n": [1, 18446744073709551617]}}', "metadata.n[1]"),
        ("/threads", b'{"metadata": {"n": -9223372036854775809}}', "metadata.n"),
        ("/threads/search", b'{"metadata": {"n": NaN}}', "metadata.n: nan"),
        ("/runs", b'{"assistant_id": "refund", "input": {"x": Infinity}}', "input.x: inf"),
        ("/assistants", b'{"graph_id": "refund", "config": {"n": 1e999}}', "config.n: inf"),
        # PostgreSQL stores 1e30 as a 31-digit integer, which no read could send back
        ("/threads", b'{"metadata": {"n": 1e30}}', "metadata.n: the number 1e+30"),
        ("/threads/search", b'{"ids": ["a", "b\\u0000"]}', "ids[1] contains a NUL"),
        ("/threads/prune", b'{"thread_ids": ["\\u0000"]}', "thread_ids[0] contains a NUL"),
        ("/assistants/refund", b'{"metadata": {"k": "\\u0000"}}', "metadata.k contains a NUL"),
        ("/threads/{thread}/history", b'{"before": "\\u0000"}', "before contains a NUL"),
        ("/threads/{thread}/history", b'{"limit": -1}', "limit"),
        # A lone surrogate (JSON's \ud800) was stored as "?" or failed the write (500).
        ("/threads", b'{"metadata": {"k": "a\\ud800"}}', "metadata.k is not valid Unicode"),
        (
            "/threads",
            b'{"metadata": {"\\udc80": 1}}',
            "metadata has a key that is not valid Unicode",
        ),
        ("/threads/{thread}/state", b'{"values": {"t": "\\ud800"}}', "values.t is not valid"),
        ("/runs", b'{"assistant_id": "refund", "input": "\\ud800"}', "input is not valid"),
        ("/store/items", b'{"namespace": ["a"], "key": "k", "value": {"v": "\\ud800"}}', "value.v"),
        # Stored, then every search that listed it failed (the encoder's depth limit).
        ("/threads", b'{"metadata": ' + _DEEP + b"}", "nested more than 100 levels"),
        ("/assistants", b'{"graph_id": "refund", "metadata": ' + _DEEP + b"}", "nested more"),
        (
            "/runs/crons",
            b'{"assistant_id": "refund", "schedule": "* * * * *", "metadata": ' + _DEEP + b"}",
            "nested more",
        ),
        ("/store/items", b'{"namespace": ["a"], "key": "k", "value": {"v": 1e30}}', "value.v"),
        ("/store/items/search", b'{"offset": 10000000000000000000}', "offset"),
        ("/store/namespaces", b'{"max_depth": 10000000000000000000}', "max_depth"),
        # A date past what datetimes hold (500), and keys that replaced the run's checkpointer.
        ("/runs", b'{"assistant_id": "refund", "after_seconds": 1e12}', "after_seconds"),
        (
            "/runs",
            b'{"assistant_id": "refund", "config": {"configurable": {"__pregel_checkpointer": 1}}}',
            "'__pregel_checkpointer' is reserved",
        ),
    ],
)
async def test_values_the_store_cannot_hold_are_refused(
    fuzzed: tuple[str, str], known: dict[str, str], path: str, body: bytes, named: str
) -> None:
    """A number outside 64 bits was stored, then every read of it failed (500): a thread
    search listing it broke for everyone; a NUL character or a negative limit reached
    PostgreSQL (500). Now each is refused, naming where it is."""
    base, url = fuzzed
    before = await _count_runs(url)
    method = {"/store/items": "PUT"}.get(
        path, "PATCH" if path.startswith("/assistants/") else "POST"
    )
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        answer = await http.request(
            method,
            path.format(thread=known["thread_id"]),
            content=body,
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 422, answer.text
        assert named in answer.text, answer.text
        listed = await http.post("/threads/search", json={"limit": 1000})
        assert listed.status_code == 200, listed.text
    assert await _count_runs(url) == before


async def test_a_history_filter_the_checkpointer_refuses_is_a_422(
    fuzzed: tuple[str, str], known: dict[str, str]
) -> None:
    """The SQLite checkpointer refuses metadata filter keys other than letters, digits,
    ``_``, ``.`` and ``-`` (a 500 before); PostgreSQL's takes them."""
    async with httpx.AsyncClient(base_url=fuzzed[0], timeout=30) as http:
        answer = await http.post(
            f"/threads/{known['thread_id']}/history", json={"metadata": {"a b'": 1}}
        )
    if fuzzed[1].startswith("sqlite"):
        assert answer.status_code == 422, answer.text
        assert "metadata" in answer.json()["detail"], answer.text
        assert "a b'" in answer.json()["detail"], answer.text
    else:
        assert answer.status_code == 200, answer.text
        assert answer.json() == []


@pytest.mark.parametrize("odd", ["a\x00b", "\udc80", "x" * 5000, "%", ".."])
async def test_odd_ids_in_every_path_are_refused(fuzzed: tuple[str, str], odd: str) -> None:
    """Every operation with an id in its path, given an id that cannot exist (a NUL, a lone
    surrogate, too long, ``%``, ``..``): a 4xx, never a 5xx."""
    segment = quote(odd.encode("utf-8", "surrogatepass"), safe="").replace(".", "%2E")
    async with httpx.AsyncClient(base_url=fuzzed[0], timeout=30, headers=DANA) as http:
        for path, operations in DOCUMENT["paths"].items():
            if "{" not in path:
                continue
            url = re.sub(r"\{[^}]+\}", segment, path)
            for method in operations:
                body = {"assistant_id": "refund", "decision": "approve", "metadata": {}}
                answer = await http.request(method.upper(), url, json=body)
                assert 400 <= answer.status_code < 500, (method, url, answer.text)


@pytest.mark.parametrize("segment", ["%fe%fe%fe", "%C1%BF%80", "a%ff"])
async def test_an_id_that_is_not_utf8_is_refused_not_replaced(
    fuzzed: tuple[str, str], segment: str
) -> None:
    """Bytes that are not UTF-8 were replaced by U+FFFD, so ``%fe`` and ``%ff`` named the
    same thread; now such an id is a 422 that says so."""
    async with httpx.AsyncClient(base_url=fuzzed[0], timeout=30, headers=DANA) as http:
        for path in (f"/threads/{segment}", f"/threads/{segment}/state", f"/approvals/{segment}"):
            answer = await http.get(path)
            assert answer.status_code == 422, (path, answer.text)
            assert "not UTF-8" in answer.json()["detail"], answer.text
        created = await http.post(f"/threads/{segment}/runs/wait", json={"assistant_id": "refund"})
        assert created.status_code == 422, created.text


async def test_a_nul_in_every_query_parameter_is_refused(
    fuzzed: tuple[str, str], known: dict[str, str]
) -> None:
    """Every query parameter of every operation, given a NUL character (on ids that exist):
    a 4xx or an answer, never a 5xx."""
    async with httpx.AsyncClient(base_url=fuzzed[0], timeout=30, headers=DANA) as http:
        for path, operations in DOCUMENT["paths"].items():
            url = path.format(**{k: quote(v, safe="") for k, v in known.items()}, namespace="x")
            for method, operation in operations.items():
                if method == "delete":
                    continue
                for parameter in operation.get("parameters", []):
                    if parameter["in"] != "query":
                        continue
                    answer = await http.request(
                        method.upper(), url, params={parameter["name"]: "a\x00b"}, json={}
                    )
                    assert answer.status_code < 500, (method, url, parameter, answer.text)


@pytest.mark.parametrize("amount", [2**70, 1e30, -(2**64)])
async def test_an_edit_with_a_number_json_cannot_hold_is_refused(
    fuzzed: tuple[str, str], amount: float
) -> None:
    """Edited arguments are a body too: a number beyond 64 bits is a 4xx, the run still waits."""
    client = get_client(url=fuzzed[0])
    thread_id, _ = await waiting_refund(client, 700)
    async with httpx.AsyncClient(base_url=fuzzed[0], timeout=30, headers=DANA) as http:
        req = await approval_of(http, thread_id)
        args = {**req["args"], "amount_cents": amount}
        body = {"decision": "edit", "args_sha256": req["args_sha256"], "args": args}
        answer = await http.post(f"/approvals/{req['approval_id']}/decide", json=body)
        assert 400 <= answer.status_code < 500, answer.text
        assert "amount_cents" in answer.text or "64-bit" in answer.text, answer.text
        assert (await approval_of(http, thread_id))["decision"] is None


@pytest.mark.parametrize(
    "call",
    [
        ("GET", "/threads/{thread}/history", {"limit": str(2**70)}, None, {}),
        ("POST", "/threads/{thread}/history", {}, {"limit": 2**63}, {}),
        ("POST", "/threads/search", {}, {"offset": 2**63}, {}),
        ("POST", "/assistants/search", {}, {"limit": 2**63}, {}),
        ("POST", "/assistants/refund/versions", {}, {"offset": 2**63}, {}),
        ("POST", "/assistants/refund/latest", {}, {"version": 2**63}, {}),
        ("GET", "/threads/{thread}/runs", {"offset": str(2**63)}, None, {}),
        ("GET", "/threads/{thread}/runs/{run}/stream", {}, None, {"last-event-id": str(2**70)}),
        ("GET", "/threads/{thread}/runs/{run}/stream", {}, None, {"last-event-id": "-2"}),
        ("GET", "/v1/runs/{run}/events", {"after": str(10**19)}, None, DANA),
    ],
)
async def test_counts_beyond_what_a_database_takes_are_refused(
    fuzzed: tuple[str, str], known: dict[str, str], call: tuple[Any, ...]
) -> None:
    """A limit, offset, version or event id beyond 63 bits reached the database (500)."""
    method, path, query, body, headers = call
    url = path.format(thread=known["thread_id"], run=known["run_id"])
    async with httpx.AsyncClient(base_url=fuzzed[0], timeout=30) as http:
        answer = await http.request(method, url, params=query, json=body, headers=headers)
    assert answer.status_code == 422, answer.text
