"""Approvals decided over HTTP as the authenticated caller (API keys), never as a header or
body says: identity, roles and tenant all come from the key. The inbox's pages log a person
in with their key (a server-side session behind an HttpOnly cookie, forms bound to it)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from tests.server.conftest import ServeProcess, _store_url
from tests.server.inbox import PROJECT, finished, waiting_refund
from tests.server.test_apikeys import apikeys, new_key


class Keys:
    def __init__(self, base: str, keys: dict[str, str], url: str, workdir: Path) -> None:
        self.base = base
        self.keys = keys
        self.url = url
        self.workdir = workdir

    def http(self, user: str | None, **headers: str) -> httpx.AsyncClient:
        sent = dict(headers)
        if user is not None:
            sent["x-api-key"] = self.keys[user]
        return httpx.AsyncClient(base_url=self.base, headers=sent, timeout=30)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def keys(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Keys]:
    workdir: Path = tmp_path_factory.mktemp("inbox-keys")
    with _store_url(request, request.param, workdir) as url:
        made = {
            "dana": new_key(url, "dana", "acme", workdir),  # a named approver
            "lee": new_key(url, "lee", "acme", workdir, "support-lead"),  # by role
            "eve": new_key(url, "eve", "acme", workdir),  # neither
            "mallory": new_key(url, "mallory", "evil", workdir, "support-lead"),  # other tenant
        }
        process = ServeProcess(url, workdir, project=PROJECT, auth=())
        try:
            process.start()
            yield Keys(process.base, made, url, workdir)
        finally:
            process.stop()


async def test_the_decider_is_the_key_holder(keys: Keys) -> None:
    client = get_client(url=keys.base, api_key=keys.keys["dana"])
    tid, run_id = await waiting_refund(client, 1500, "by key")

    async with keys.http(None, **{"x-tether-user": "dana"}) as anonymous:
        assert (await anonymous.get("/approvals")).status_code == 401

    # eve names dana in the headers: ignored, she is eve, who may not decide
    claims = {"x-tether-user": "dana", "x-tether-roles": "support-lead"}
    async with keys.http("eve", **claims) as eve:
        listed = await eve.get("/approvals")
        assert listed.status_code == 200
        assert listed.json()["tenant"] == "acme"
        [req] = [a for a in listed.json()["approvals"] if a["thread_id"] == tid]
        assert req["may_decide"] is False
        body = {"decision": "approve", "args_sha256": req["args_sha256"]}
        refused = await eve.post(f"/approvals/{req['approval_id']}/decide", json=body)
        assert refused.status_code == 403, refused.text
        named = await eve.post(
            f"/approvals/{req['approval_id']}/decide", json={**body, "by": "dana"}
        )
        assert named.status_code == 422  # a body naming the decider is refused

    # mallory holds the role, in another tenant: the approval does not exist for her
    async with keys.http("mallory", **{"x-tether-tenant": "acme"}) as mallory:
        assert (await mallory.get(f"/approvals/{req['approval_id']}")).status_code == 404
        decided = await mallory.post(f"/approvals/{req['approval_id']}/decide", json=body)
        assert decided.status_code == 404
        listed = await mallory.get("/approvals", params={"show": "all"})
        assert listed.json()["tenant"] == "evil"
        assert tid not in {a["thread_id"] for a in listed.json()["approvals"]}

    # lee decides by role; the decision records lee and the key it came with
    async with keys.http("lee", **{"x-tether-user": "dana"}) as lee:
        answer = await lee.post(f"/approvals/{req['approval_id']}/decide", json=body)
        assert answer.status_code == 200, answer.text
        decision = answer.json()["decision"]
        assert decision["by"] == "lee"
        assert decision["decider_source"] == "api-key:" + keys.keys["lee"].split("_")[1]
    values = await finished(client, tid, run_id)
    assert values["refunded"] == 1500


def _csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None, page.text
    return found[1]


@contextlib.asynccontextmanager
async def _logged_in(keys: Keys, key: str) -> AsyncIterator[httpx.AsyncClient]:
    """A browser-like client logged in to the inbox with ``key``."""
    async with httpx.AsyncClient(base_url=keys.base, timeout=30) as browser:
        form = await browser.get("/inbox/login")
        data = {"credential": key, "csrf": _csrf_of(form)}
        answer = await browser.post("/inbox/login", data=data)
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/inbox"
        yield browser


async def test_the_inbox_without_a_session_is_the_login_page(keys: Keys) -> None:
    async with httpx.AsyncClient(base_url=keys.base, timeout=30) as browser:
        for path in ("/inbox", "/inbox/expired", "/inbox/a/anything"):
            answer = await browser.get(path)
            assert answer.status_code == 303, (path, answer.text)
            assert answer.headers["location"] == "/inbox/login"
        refused = await browser.post("/inbox/a/anything/decide", data={"decision": "approve"})
        assert refused.status_code == 303
        page = await browser.get("/inbox/login")
        assert page.status_code == 200
        assert 'name="credential"' in page.text
        assert "API key" in page.text
        # the API still answers a JSON 401, not a redirect
        assert (await browser.get("/approvals")).status_code == 401


async def test_a_bad_key_is_refused_with_the_reason(keys: Keys) -> None:
    async with httpx.AsyncClient(base_url=keys.base, timeout=30) as browser:
        token = _csrf_of(await browser.get("/inbox/login"))
        bad = await browser.post("/inbox/login", data={"credential": "tk_nope", "csrf": token})
        assert bad.status_code == 401
        assert "that credential was refused: invalid or revoked API key" in bad.text
        assert "tether_inbox_session" not in bad.headers.get("set-cookie", "")
        empty = await browser.post("/inbox/login", data={"credential": " ", "csrf": token})
        assert empty.status_code == 422
        assert "paste your credential" in empty.text
        odd = await browser.post("/inbox/login", data={"credential": "k\u00e9y", "csrf": token})
        assert odd.status_code == 422
        assert "printable ASCII" in odd.text
        forged = await browser.post("/inbox/login", data={"credential": keys.keys["dana"]})
        assert forged.status_code == 403  # no CSRF token: no session
        assert "tether_inbox_session" not in forged.headers.get("set-cookie", "")
        assert (await browser.get("/inbox")).status_code == 303


async def test_login_gives_an_http_only_strict_session_and_logout_ends_it(keys: Keys) -> None:
    async with httpx.AsyncClient(base_url=keys.base, timeout=30) as browser:
        token = _csrf_of(await browser.get("/inbox/login"))
        logged = await browser.post(
            "/inbox/login", data={"credential": keys.keys["lee"], "csrf": token}
        )
        assert logged.status_code == 303, logged.text
        cookie = logged.headers["set-cookie"]
        assert cookie.startswith("tether_inbox_session=")
        assert keys.keys["lee"] not in cookie  # an opaque token, not the key
        for attribute in ("httponly", "samesite=strict", "max-age=28800", "path=/"):
            assert attribute in cookie.lower(), cookie
        assert "secure" not in cookie.lower()  # plain HTTP here
        queue = await browser.get("/inbox")
        assert queue.status_code == 200
        assert '<span id="who">lee (support-lead) tenant acme</span>' in queue.text, queue.text
        session = browser.cookies["tether_inbox_session"]
        out = await browser.post("/inbox/logout", data={"csrf": _csrf_of(queue)})
        assert out.status_code == 303
        assert out.headers["location"] == "/inbox/login"
    async with httpx.AsyncClient(base_url=keys.base, timeout=30) as replayed:
        replayed.cookies.set("tether_inbox_session", session)
        assert (await replayed.get("/inbox")).status_code == 303  # ended on the server


async def test_a_forged_cookie_or_a_revoked_key_is_refused(keys: Keys) -> None:
    async with httpx.AsyncClient(base_url=keys.base, timeout=30) as forged:
        forged.cookies.set("tether_inbox_session", "made-up")
        answer = await forged.get("/inbox")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/inbox/login"
    key = new_key(keys.url, "dana", "acme", keys.workdir)
    async with _logged_in(keys, key) as browser:
        assert (await browser.get("/inbox")).status_code == 200
        revoked = apikeys(keys.url, "revoke", key, cwd=keys.workdir)
        assert revoked.returncode == 0, revoked.stderr
        assert (await browser.get("/inbox")).status_code == 303  # the session's key is gone


async def test_a_decision_form_needs_the_session_token(keys: Keys) -> None:
    client = get_client(url=keys.base, api_key=keys.keys["dana"])
    tid, run_id = await waiting_refund(client, 1200, "csrf")
    async with _logged_in(keys, keys.keys["dana"]) as browser, keys.http("dana") as api:
        req = await _approval(api, tid)
        url = f"/inbox/a/{req['approval_id']}/decide"
        form = {"decision": "approve", "args_sha256": req["args_sha256"]}
        missing = await browser.post(url, data=form)
        assert missing.status_code == 403, missing.text
        assert "CSRF token" in missing.text
        wrong = await browser.post(url, data={**form, "csrf": "not-the-token"})
        assert wrong.status_code == 403
        # the token of another session (another browser, same key) is not this one's
        async with _logged_in(keys, keys.keys["dana"]) as other:
            theirs = _csrf_of(await other.get("/inbox"))
        crossed = await browser.post(url, data={**form, "csrf": theirs})
        assert crossed.status_code == 403
        assert (await _approval(api, tid))["decision"] is None
        page = await browser.get(f"/inbox/a/{req['approval_id']}")
        taken = await browser.post(url, data={**form, "csrf": _csrf_of(page)})
        assert taken.status_code == 303, taken.text
        decision = (await _approval(api, tid))["decision"]
        assert decision["by"] == "dana"
        assert decision["decider_source"] == "api-key:" + keys.keys["dana"].split("_")[1]
    values = await finished(client, tid, run_id)
    assert values["refunded"] == 1200


async def test_another_tenants_approvals_are_not_in_the_inbox(keys: Keys) -> None:
    client = get_client(url=keys.base, api_key=keys.keys["dana"])
    tid, _ = await waiting_refund(client, 1300, "tenants")
    async with keys.http("dana") as api:
        req = await _approval(api, tid)
    async with _logged_in(keys, keys.keys["mallory"]) as browser:  # support-lead of tenant evil
        queue = await browser.get("/inbox", params={"show": "all"})
        assert queue.status_code == 200
        assert req["approval_id"] not in queue.text
        assert tid not in queue.text
        shown = await browser.get(f"/inbox/a/{req['approval_id']}")
        assert shown.status_code == 404
        form = {"decision": "approve", "args_sha256": req["args_sha256"]}
        decided = await browser.post(
            f"/inbox/a/{req['approval_id']}/decide", data={**form, "csrf": _csrf_of(queue)}
        )
        assert decided.status_code == 404
    async with keys.http("dana") as api:
        assert (await _approval(api, tid))["decision"] is None


async def _approval(api: httpx.AsyncClient, thread_id: str) -> dict[str, Any]:
    listed = await api.get("/approvals", params={"show": "all"})
    assert listed.status_code == 200, listed.text
    [found] = [a for a in listed.json()["approvals"] if a["thread_id"] == thread_id]
    return dict(found)
