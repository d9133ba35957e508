"""The approvals API and pages of a real ``tether serve --no-auth``: list, get, decide, refusals.

Each test starts refund runs of its own (each on its own thread) on a server
shared by the module, and finds its requests by thread.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.server.conftest import _store_url
from tests.server.inbox import DANA, approval_of, finished, inbox_server, waiting_refund
from tether.runtime import Runtime

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def serving(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """``(base URL, run store URL)`` of a ``tether serve --no-auth`` shared by the module."""
    workdir: Path = tmp_path_factory.mktemp("inbox")
    with _store_url(request, request.param, workdir) as url, inbox_server(url, workdir) as server:
        yield server.base, url


@pytest.fixture
def base(serving: tuple[str, str]) -> str:
    return serving[0]


@pytest.fixture
def client(base: str) -> LangGraphClient:
    return get_client(url=base)


@pytest.fixture
async def http(base: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as session:
        yield session


async def _decide(
    http: httpx.AsyncClient, approval_id: str, body: dict[str, Any], user: str = "dana"
) -> httpx.Response:
    return await http.post(
        f"/approvals/{approval_id}/decide", json=body, headers={"x-tether-user": user}
    )


async def test_list_get_and_approve(http: httpx.AsyncClient, client: LangGraphClient) -> None:
    tid, run_id = await waiting_refund(client, 4200, "late parcel")
    listed = await http.get("/approvals", headers=DANA)
    assert listed.status_code == 200
    mine = [a for a in listed.json()["approvals"] if a["thread_id"] == tid]
    assert len(mine) == 1
    req = mine[0]
    assert req["state"] == "pending"
    assert req["args"] == {"order_id": "o-1", "amount_cents": 4200, "note": "late parcel"}
    assert req["run"]["run_id"] == run_id
    assert req["run"]["graph_id"] == "refund"
    assert req["may_decide"] is True
    assert req["approvers"] == {"users": ["dana"], "roles": ["support-lead"]}
    assert "4200 cents back" in req["why"]

    got = await http.get(f"/approvals/{req['approval_id']}", headers=DANA)
    assert got.status_code == 200
    assert got.json()["args_sha256"] == req["args_sha256"]
    assert got.json()["args_json_schema"]["properties"]["amount_cents"]["type"] == "integer"

    answer = await _decide(
        http, req["approval_id"], {"decision": "approve", "args_sha256": req["args_sha256"]}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["decision"]["by"] == "dana"
    assert answer.json()["decision"]["decider_source"] == "no-auth:header"
    values = await finished(client, tid, run_id)
    assert values["refunded"] == 4200
    assert values["decision"] == "approve"

    again = await _decide(
        http, req["approval_id"], {"decision": "approve", "args_sha256": req["args_sha256"]}
    )
    assert again.status_code == 409
    assert "already decided" in again.json()["detail"]
    decided = await http.get(f"/approvals/{req['approval_id']}", headers=DANA)
    assert decided.json()["state"] == "approved"
    assert decided.json()["decision"]["by"] == "dana"


async def test_filters(http: httpx.AsyncClient, client: LangGraphClient) -> None:
    tid, _ = await waiting_refund(client, 1500)

    async def listed(**params: str) -> list[str]:
        answer = await http.get("/approvals", params=params, headers=DANA)
        assert answer.status_code == 200, answer.text
        return [a["thread_id"] for a in answer.json()["approvals"]]

    assert tid in await listed()
    assert tid in await listed(approver="dana")
    assert tid not in await listed(approver="zed")
    assert tid in await listed(role="support-lead")
    assert tid not in await listed(role="finance")
    assert tid in await listed(expiring_before="2999-01-01T00:00:00+00:00")
    assert tid not in await listed(expiring_before="2000-01-01T00:00:00+00:00")
    assert tid not in await listed(older_than="3d")
    assert tid in await listed(older_than="0")
    assert tid in await listed(mine="true")
    assert tid in await listed(tenant="")
    assert tid not in await listed(show="expired")
    assert tid not in await listed(show="decided")

    theirs = await http.get("/approvals", params={"mine": "true"}, headers={"x-tether-user": "zed"})
    assert tid not in [a["thread_id"] for a in theirs.json()["approvals"]]

    bad = await http.get("/approvals", params={"older_than": "soon"}, headers=DANA)
    assert bad.status_code == 422
    assert "older_than='soon' is not a duration" in bad.json()["detail"]
    bad = await http.get("/approvals", params={"older_than": "99999999999d"}, headers=DANA)
    assert bad.status_code == 422  # was an OverflowError: a 500
    assert "longer than 100 years" in bad.json()["detail"]
    bad = await http.get("/approvals", params={"expiring_before": "friday"}, headers=DANA)
    assert bad.status_code == 422
    assert "expiring_before='friday' is not an ISO 8601 time" in bad.json()["detail"]
    bad = await http.get("/approvals", params={"show": "mine"}, headers=DANA)
    assert bad.status_code == 422
    bad = await http.get("/approvals", params={"colour": "red"}, headers=DANA)
    assert bad.status_code == 422
    assert "unknown filter 'colour'" in bad.json()["detail"]
    other = await http.get("/approvals", params={"tenant": "acme"}, headers=DANA)
    assert other.status_code == 403
    assert "tenant 'acme'" in other.json()["detail"]


async def test_the_order_is_soonest_expiring_then_oldest(
    http: httpx.AsyncClient, client: LangGraphClient
) -> None:
    later, _ = await waiting_refund(client, 100, expires_in_ms=7_200_000)
    sooner, _ = await waiting_refund(client, 200, expires_in_ms=3_000_000)
    by_expiry = await http.get("/approvals", headers=DANA)
    ids = [a["thread_id"] for a in by_expiry.json()["approvals"]]
    assert ids.index(sooner) < ids.index(later)
    keys = [(a["expires_at"], a["requested_at"]) for a in by_expiry.json()["approvals"]]
    assert keys == sorted(keys)
    # requests made within the same second tie on age; the order is the documented key
    by_age = await http.get("/approvals", params={"sort": "age"}, headers=DANA)
    keys = [(a["requested_at"], a["expires_at"]) for a in by_age.json()["approvals"]]
    assert keys == sorted(keys)
    assert {later, sooner} <= {a["thread_id"] for a in by_age.json()["approvals"]}


async def test_another_tenant_sees_nothing(
    http: httpx.AsyncClient, client: LangGraphClient
) -> None:
    tid, _ = await waiting_refund(client, 900)
    req = await approval_of(http, tid)
    acme = {"x-tether-user": "dana", "x-tether-tenant": "acme"}
    listed = await http.get("/approvals", params={"show": "all"}, headers=acme)
    assert tid not in [a["thread_id"] for a in listed.json()["approvals"]]
    assert (await http.get(f"/approvals/{req['approval_id']}", headers=acme)).status_code == 404
    answer = await http.post(
        f"/approvals/{req['approval_id']}/decide",
        json={"decision": "approve", "args_sha256": req["args_sha256"]},
        headers=acme,
    )
    assert answer.status_code == 404
    assert (await approval_of(http, tid))["state"] == "pending"


async def test_no_user_no_answer(http: httpx.AsyncClient) -> None:
    answer = await http.get("/approvals")
    assert answer.status_code == 401
    assert "x-tether-user" in answer.json()["detail"]
    reserved = await http.get("/approvals", headers={"x-tether-user": "tether:expiry"})
    assert reserved.status_code == 422


async def test_wrong_hash_is_refused_and_nothing_is_decided(
    http: httpx.AsyncClient, client: LangGraphClient
) -> None:
    tid, run_id = await waiting_refund(client, 3000)
    req = await approval_of(http, tid)
    wrong = {"decision": "approve", "args_sha256": "0" * 64}
    answer = await _decide(http, req["approval_id"], wrong)
    assert answer.status_code == 409
    assert "sha256" in answer.json()["detail"]
    missing = await _decide(http, req["approval_id"], {"decision": "approve"})
    assert missing.status_code == 409
    after = await approval_of(http, tid)
    assert after["state"] == "pending"
    assert after["decision"] is None
    assert after["run"]["run_id"] == run_id
    assert (await client.threads.get(tid))["status"] == "interrupted"


async def test_edit_is_validated_then_runs_the_edited_arguments(
    http: httpx.AsyncClient, client: LangGraphClient
) -> None:
    tid, run_id = await waiting_refund(client, 5000, "broken lid")
    req = await approval_of(http, tid)
    sha = req["args_sha256"]
    bad = await _decide(
        http,
        req["approval_id"],
        {"decision": "edit", "args_sha256": sha, "args": {**req["args"], "amount_cents": -5}},
    )
    assert bad.status_code == 422
    assert "amount_cents" in bad.json()["detail"]
    assert "greater than 0" in bad.json()["detail"]
    assert (await approval_of(http, tid))["state"] == "pending"
    no_args = await _decide(http, req["approval_id"], {"decision": "edit", "args_sha256": sha})
    assert no_args.status_code == 422

    good = await _decide(
        http,
        req["approval_id"],
        {
            "decision": "edit",
            "args_sha256": sha,
            "args": {**req["args"], "amount_cents": 2500},
            "reason": "half, agreed on the phone",
        },
    )
    assert good.status_code == 200, good.text
    values = await finished(client, tid, run_id)
    assert values["refunded"] == 2500
    assert values["decision"] == "edit"
    assert (await approval_of(http, tid))["state"] == "edited"


async def test_reject_needs_a_reason(http: httpx.AsyncClient, client: LangGraphClient) -> None:
    tid, run_id = await waiting_refund(client, 800)
    req = await approval_of(http, tid)
    sha = req["args_sha256"]
    bare = await _decide(http, req["approval_id"], {"decision": "reject", "args_sha256": sha})
    assert bare.status_code == 422
    assert "reason" in bare.json()["detail"]
    answer = await _decide(
        http,
        req["approval_id"],
        {"decision": "reject", "args_sha256": sha, "reason": "order was never paid"},
    )
    assert answer.status_code == 200, answer.text
    values = await finished(client, tid, run_id)
    assert values["refunded"] is None
    assert values["decision"] == "reject"


async def test_the_decider_comes_from_the_user_never_the_body(
    http: httpx.AsyncClient, client: LangGraphClient
) -> None:
    tid, _ = await waiting_refund(client, 700)
    req = await approval_of(http, tid)
    sha = req["args_sha256"]
    smuggled = await _decide(
        http, req["approval_id"], {"decision": "approve", "args_sha256": sha, "by": "dana"}, "zed"
    )
    assert smuggled.status_code == 422
    assert "may not say who decides" in smuggled.json()["detail"]
    stranger = await _decide(
        http, req["approval_id"], {"decision": "approve", "args_sha256": sha}, "zed"
    )
    assert stranger.status_code == 403
    assert "'zed'" in stranger.json()["detail"]
    lead = await http.post(
        f"/approvals/{req['approval_id']}/decide",
        json={"decision": "approve", "args_sha256": sha},
        headers={"x-tether-user": "sam", "x-tether-roles": "support-lead"},
    )
    assert lead.status_code == 200, lead.text
    assert lead.json()["decision"]["by"] == "sam"
    assert lead.json()["decision"]["roles"] == ["support-lead"]
    form = await http.post(
        f"/approvals/{req['approval_id']}/decide",
        content=b"decision=approve",
        headers={**DANA, "content-type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 415


async def test_an_expired_request_is_refused(
    http: httpx.AsyncClient, client: LangGraphClient
) -> None:
    tid, _ = await waiting_refund(client, 600, expires_in_ms=1)
    req = await approval_of(http, tid)
    # overdue until the server's scheduler applies the expiry policy (within a second)
    assert req["state"] in ("overdue", "expired")
    assert tid in [
        a["thread_id"]
        for a in (await http.get("/approvals", params={"show": "expired"}, headers=DANA)).json()[
            "approvals"
        ]
    ]
    assert tid not in [
        a["thread_id"] for a in (await http.get("/approvals", headers=DANA)).json()["approvals"]
    ]
    answer = await _decide(
        http, req["approval_id"], {"decision": "approve", "args_sha256": req["args_sha256"]}
    )
    assert answer.status_code == 409
    # refused as expired, or (once the scheduler applied the policy) as decided by expiry
    detail = answer.json()["detail"]
    assert "expired" in detail or "expire by tether:expiry" in detail, detail
    decision = (await approval_of(http, tid))["decision"]
    assert decision is None or decision["decision"] == "expire", decision
    page = await http.get("/inbox/expired", headers=DANA)
    assert page.status_code == 200
    assert req["approval_id"] in page.text


async def test_pages_escape_every_field(http: httpx.AsyncClient, client: LangGraphClient) -> None:
    tid, _ = await waiting_refund(client, 1200, SCRIPT + "\u202e0001")
    req = await approval_of(http, tid)
    queue = await http.get("/inbox", headers=DANA)
    detail = await http.get(f"/inbox/a/{req['approval_id']}", headers=DANA)
    for page in (queue, detail):
        assert page.status_code == 200
        assert SCRIPT not in page.text
        assert "<script" not in page.text.lower()
        assert "\u202e" not in page.text
        assert "script-src" not in page.headers["content-security-policy"]
        assert "default-src 'none'" in page.headers["content-security-policy"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail.text
    assert "\\u202e0001" in detail.text  # the bidi override shown, not obeyed
    # the bound arguments and their hash come before the free text
    text = detail.text
    assert text.index(req["args_sha256"]) < text.index('data-field="why"')


async def test_forms_need_the_csrf_token(http: httpx.AsyncClient, client: LangGraphClient) -> None:
    tid, _ = await waiting_refund(client, 1100)
    req = await approval_of(http, tid)
    detail = await http.get(f"/inbox/a/{req['approval_id']}", headers=DANA)
    token = re.search(r'name="csrf" value="([^"]+)"', detail.text)
    assert token is not None
    assert "samesite=strict" in detail.headers["set-cookie"].lower()
    form = {"decision": "approve", "args_sha256": req["args_sha256"], "csrf": "forged"}
    forged = await http.post(
        f"/inbox/a/{req['approval_id']}/decide",
        data=form,
        headers=DANA,
    )
    assert forged.status_code == 403
    assert "CSRF" in forged.text
    assert (await approval_of(http, tid))["state"] == "pending"
    taken = await http.post(
        f"/inbox/a/{req['approval_id']}/decide",
        data={**form, "csrf": token[1]},
        headers=DANA,
    )
    assert taken.status_code == 303
    assert (await approval_of(http, tid))["state"] == "approved"


async def test_the_edit_form_reads_each_field(
    http: httpx.AsyncClient, client: LangGraphClient
) -> None:
    tid, run_id = await waiting_refund(client, 4000, "first note")
    req = await approval_of(http, tid)
    page = await http.get(f"/inbox/a/{req['approval_id']}", headers=DANA)
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None
    assert 'name="arg:amount_cents" value="4000"' in page.text
    assert 'name="arg:note" value="&quot;first note&quot;"' in page.text  # JSON, escaped
    form = {
        "csrf": token[1],
        "decision": "edit",
        "args_sha256": req["args_sha256"],
        "arg:order_id": '"o-1"',
        "arg:amount_cents": "lots",
        "arg:note": "typed without quotes",
    }
    url = f"/inbox/a/{req['approval_id']}/decide"
    refused = await http.post(url, data=form, headers=DANA)
    assert refused.status_code == 422
    assert "amount_cents: &#x27;lots&#x27; is not a valid integer" in refused.text
    assert 'value="typed without quotes"' in refused.text  # what was typed is kept
    assert (await approval_of(http, tid))["state"] == "pending"
    taken = await http.post(url, data={**form, "arg:amount_cents": "3000"}, headers=DANA)
    assert taken.status_code == 303, taken.text
    values = await finished(client, tid, run_id)
    assert values["refunded"] == 3000
    decided = (await approval_of(http, tid))["decision"]
    assert decided["args"] == {
        "order_id": "o-1",
        "amount_cents": 3000,
        "note": "typed without quotes",
    }


async def test_an_orphaned_request_is_shown_apart_and_refused(
    serving: tuple[str, str], http: httpx.AsyncClient, client: LangGraphClient
) -> None:
    tid, run_id = await waiting_refund(client, 999)
    req = await approval_of(http, tid)
    # The run row cancelled on its own, its request left behind (as by a process that
    # died between the two): no run waits on the request any more.
    async with Runtime(serving[1]) as rt:
        await rt.store.cancel_run(run_id)
    orphan = await approval_of(http, tid)
    assert orphan["state"] == "orphaned"
    assert orphan["run"] is None
    shown = await http.get("/approvals", params={"show": "orphaned"}, headers=DANA)
    assert tid in [a["thread_id"] for a in shown.json()["approvals"]]
    queue = await http.get("/approvals", headers=DANA)
    assert tid not in [a["thread_id"] for a in queue.json()["approvals"]]
    page = await http.get("/inbox/expired", headers=DANA)
    assert req["approval_id"] in page.text.split("<h2>Orphaned</h2>")[1]
    answer = await _decide(
        http, req["approval_id"], {"decision": "approve", "args_sha256": req["args_sha256"]}
    )
    assert answer.status_code == 409
    assert "waits on it" in answer.json()["detail"]
    assert (await approval_of(http, tid))["decision"] is None


async def test_login_sets_a_session_behind_the_csrf_token(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        assert (await browser.get("/inbox")).headers["location"] == "/inbox/login"
        form = await browser.get("/inbox/login")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert token is not None
        forged = await browser.post("/inbox/login", data={"user": "dana", "csrf": "x"})
        assert forged.status_code == 403
        reserved = await browser.post(
            "/inbox/login", data={"user": "tether:expiry", "csrf": token[1]}
        )
        assert reserved.status_code == 422
        assert "reserved" in reserved.text
        logged = await browser.post(
            "/inbox/login", data={"user": "dana", "roles": "support-lead", "csrf": token[1]}
        )
        assert logged.status_code == 303
        assert "tether_session=" in logged.headers["set-cookie"]
        assert "samesite=strict" in logged.headers["set-cookie"].lower()
        queue = await browser.get("/inbox")
        assert queue.status_code == 200
        assert '<span id="who">dana (support-lead)</span>' in queue.text
        fresh = re.search(r'name="csrf" value="([^"]+)"', queue.text)
        assert fresh is not None
        assert fresh[1] != token[1]  # a new token for the new session
        mine = await browser.get("/approvals", params={"mine": "true"})
        assert mine.status_code == 200  # the API knows the session's user too
        out = await browser.post("/inbox/logout", data={"csrf": fresh[1]})
        assert out.status_code == 303
        assert (await browser.get("/inbox")).status_code == 303


@pytest.mark.parametrize(
    "body",
    [
        '{"decision": "approve", "args_sha256": "%s", "reason": "ok \\ud800"}',
        '{"decision": "approve", "args_sha256": "%s", "reason": "ok \\u0000"}',
        '{"decision": "approve", "args_sha256": "%s", "x": ' + "[" * 150 + "]" * 150 + "}",
    ],
    ids=["lone-surrogate", "nul", "too-deep"],
)
async def test_a_decision_no_store_can_keep_is_refused_before_it_is_stored(
    http: httpx.AsyncClient, client: LangGraphClient, body: str
) -> None:
    """A decision stored and then refused by the resume's own write left its run waiting for
    good (and a second decision was 409): it is refused first, and the request stays open."""
    tid, run_id = await waiting_refund(client, 3100)
    req = await approval_of(http, tid)
    answer = await http.post(
        f"/approvals/{req['approval_id']}/decide",
        content=(body % req["args_sha256"]).encode(),
        headers={**DANA, "content-type": "application/json"},
    )
    assert answer.status_code == 422, answer.text
    assert re.search(r"Unicode|NUL|nested", answer.json()["detail"]), answer.json()
    assert (await approval_of(http, tid))["state"] == "pending"
    good = {"decision": "approve", "args_sha256": req["args_sha256"], "reason": "ok"}
    assert (await _decide(http, req["approval_id"], good)).status_code == 200
    assert (await finished(client, tid, run_id))["refunded"] == 3100
