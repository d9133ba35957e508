"""Approvals decided over HTTP as the authenticated caller (API keys), never as a header or
body says: identity, roles and tenant all come from the key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.server.conftest import ServeProcess, _store_url
from tests.server.inbox import PROJECT, finished, waiting_refund
from tests.server.test_apikeys import new_key


class Keys:
    def __init__(self, base: str, keys: dict[str, str]) -> None:
        self.base = base
        self.keys = keys

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
            yield Keys(process.base, made)
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
