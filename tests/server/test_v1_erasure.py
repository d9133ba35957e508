"""Erasure and the audit store over HTTP (``/v1/erasure``, ``/v1/audit``) of a real
``tether serve --no-auth``, on SQLite and PostgreSQL: raw storage is read behind the
server's back to check that nothing of the subject is left."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from tests.backends import Backend
from tests.retention.world import GRAPH, marker, open_world, seed
from tests.server.conftest import ServeProcess, _store_url
from tests.server.store_rows import put_item
from tests.server.test_fuzz import DOCUMENT
from tether.retention.summary import sha256_text
from tether.runtime.ids import tenant_store_root
from tether.server.apikeys import open_key_store

ACME_ADMIN = {"x-tether-user": "root", "x-tether-roles": "admin", "x-tether-tenant": "acme"}
ACME_ERASER = {
    "x-tether-user": "dpo",
    "x-tether-roles": "viewer,erasure",
    "x-tether-tenant": "acme",
}
ACME_USER = {"x-tether-user": "pat", "x-tether-roles": "approver", "x-tether-tenant": "acme"}
GLOBEX_ADMIN = {"x-tether-user": "ola", "x-tether-roles": "admin", "x-tether-tenant": "globex"}


@dataclass
class Site:
    base: str
    backend: Backend
    workdir: Path

    async def seed(self, *threads: tuple[str, str, str | None]) -> None:
        """Threads ``(thread_id, tenant, owner)`` as the runtime stores them."""
        async with open_world(self.backend, self.workdir) as world:
            for thread_id, tenant, owner in threads:
                await seed(world, thread_id, "success", days=1, tenant=tenant, owner=owner)

    async def raw(self) -> str:
        async with open_world(self.backend, self.workdir) as world:
            return await world.raw()

    async def left(self, *things: str) -> list[str]:
        """Which of ``things`` still have a value in raw storage."""
        text = await self.raw()
        return [t for t in things if marker(t) in text]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    workdir: Path = tmp_path_factory.mktemp("erasure")
    with _store_url(request, request.param, workdir) as url:
        process = ServeProcess(url, workdir, ("--workers", "0"))
        try:
            process.start()
            yield Site(process.base, Backend(request.param, url), workdir)
        finally:
            process.stop()


@pytest.fixture
async def http(site: Site) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=site.base, timeout=60) as session:
        yield session


async def _erase(http: httpx.AsyncClient, who: dict[str, str], **subject: Any) -> httpx.Response:
    return await http.post("/v1/erasure", json=subject, headers=who)


async def test_erasing_a_thread_leaves_nothing_and_keeps_the_receipt(
    site: Site, http: httpx.AsyncClient
) -> None:
    await site.seed(("x-t1", "acme", "ann"), ("x-keep", "acme", "ann"))

    refused = await _erase(http, ACME_USER, thread_id="x-t1")
    assert refused.status_code == 403, refused.text
    assert "role 'admin' or 'erasure'" in refused.json()["detail"]
    assert "approver" in refused.json()["detail"]
    foreign = await _erase(http, GLOBEX_ADMIN, thread_id="x-t1")
    assert foreign.status_code == 404, foreign.text
    assert foreign.json()["detail"] == "no thread 'x-t1' for this tenant"
    assert await site.left("x-t1") == ["x-t1"]

    answer = await _erase(http, ACME_ERASER, thread_id="x-t1")
    assert answer.status_code == 201, answer.text
    receipt = answer.json()
    assert receipt["subject_kind"] == "thread"
    assert receipt["subject_sha256"] == sha256_text("x-t1")
    assert receipt["tenant_sha256"] == sha256_text("acme")
    assert receipt["threads"] == [sha256_text("x-t1")]
    counts = receipt["counts"]
    assert (counts["threads"], counts["runs"], counts["checkpoints"]) == (1, 1, 3)
    assert (counts["steps"], counts["tool_records"]) == (1, 1)
    raw = await site.raw()
    assert marker("x-t1") not in raw
    assert "x-t1" not in raw.replace(sha256_text("x-t1"), "")
    assert marker("x-keep") in raw

    kept = await http.get(f"/v1/erasure/{receipt['receipt_id']}", headers=ACME_ADMIN)
    assert kept.status_code == 200, kept.text
    assert kept.json() == receipt
    for who, status in ((GLOBEX_ADMIN, 404), (ACME_USER, 403)):
        other = await http.get(f"/v1/erasure/{receipt['receipt_id']}", headers=who)
        assert other.status_code == status, other.text

    again = await _erase(http, ACME_ADMIN, thread_id="x-t1")  # idempotent
    assert again.status_code == 201, again.text
    assert again.json()["receipt_id"] != receipt["receipt_id"]
    assert {k: v for k, v in again.json()["counts"].items() if v} == {}
    trail = await http.get("/v1/audit/threads/x-t1", headers=ACME_ADMIN)
    assert trail.status_code == 200, trail.text
    assert trail.json()["summaries"] == []
    assert [r["receipt_id"] for r in trail.json()["receipts"]] == [
        receipt["receipt_id"],
        again.json()["receipt_id"],
    ]
    assert (await http.get("/v1/audit/threads/x-t1", headers=GLOBEX_ADMIN)).status_code == 404
    assert (await _erase(http, GLOBEX_ADMIN, thread_id="x-t1")).status_code == 404


async def test_a_user_is_erased_in_the_callers_tenant_only(
    site: Site, http: httpx.AsyncClient
) -> None:
    await site.seed(("x-u-acme", "acme", "ursula"), ("x-u-globex", "globex", "ursula"))
    answer = await _erase(http, ACME_ADMIN, user="ursula")
    assert answer.status_code == 201, answer.text
    assert answer.json()["threads"] == [sha256_text("x-u-acme")]
    assert await site.left("x-u-acme", "x-u-globex") == ["x-u-globex"]
    audit = await http.get("/v1/audit/threads/x-u-globex", headers=GLOBEX_ADMIN)
    assert audit.status_code == 200, audit.text  # the thread is globex's: it has no record yet
    assert audit.json() == {"thread_id": "x-u-globex", "summaries": [], "receipts": []}


async def test_erasing_the_tenant_takes_its_crons_and_assistants(
    site: Site, http: httpx.AsyncClient
) -> None:
    await site.seed(("x-i-1", "initech", None), ("x-i-2", "initech", None), ("x-g", "globex", None))

    async def extras() -> tuple[str, str]:
        async with open_world(site.backend, site.workdir) as world:
            store = world.runtime.store
            mine = await store.put_assistant(
                GRAPH, tenant="initech", metadata={"note": marker("x-i-assistant")}
            )
            theirs = await store.put_assistant(GRAPH, tenant="globex")
            cron = await store.create_cron(
                mine.assistant_id,
                "0 0 1 1 *",
                tenant="initech",
                payload={"input": {"note": marker("x-i-cron")}},
            )
            return cron.cron_id, theirs.assistant_id

    cron_id, globex_assistant = await extras()
    url = site.backend.url
    for tenant in ("initech", "globex"):
        await put_item(
            url, (tenant_store_root(tenant), "notes"), "k", {"n": marker(f"{tenant}-item")}
        )
    async with open_key_store(url) as keys:
        initech_key = await keys.create(user="ann", tenant="initech")
        globex_key = await keys.create(user="gil", tenant="globex")
    admin = {**ACME_ADMIN, "x-tether-tenant": "initech"}
    foreign = await _erase(http, admin, tenant="globex")
    assert foreign.status_code == 403, foreign.text
    assert foreign.json()["detail"] == (
        "user 'root' acts for tenant 'initech' and cannot erase tenant 'globex'"
    )
    answer = await _erase(http, admin, tenant="initech")
    assert answer.status_code == 201, answer.text
    counts = answer.json()["counts"]
    assert (counts["threads"], counts["crons"], counts["assistants"]) == (2, 1, 1)
    assert (counts["store_items"], counts["api_keys"]) == (1, 1)
    raw = await site.raw()
    gone = ("x-i-1", "x-i-2", "x-i-assistant", "x-i-cron", "initech-item")
    assert [t for t in gone if marker(t) in raw] == []
    assert cron_id not in raw
    assert initech_key.key.key_id not in raw
    assert [t for t in ("x-g", "globex-item") if marker(t) not in raw] == []
    assert globex_assistant in raw
    assert globex_key.key.key_id in raw


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({}, "an erasure names exactly one subject: thread_id, tenant or user; got 0"),
        ({"thread_id": "a", "user": "b"}, "got 2"),
        ({"thread": "a"}, "thread"),
        ({"thread_id": ""}, "thread_id must not be empty"),
        ({"user": "a\u0000b"}, "contains a NUL character"),
        ({"tenant": "t" * 300}, "the limit is 255"),
        ({"thread_id": 7}, "thread_id"),
        ([], "body"),
    ],
)
async def test_malformed_erasures_are_refused_naming_the_problem(
    http: httpx.AsyncClient, body: Any, named: str
) -> None:
    answer = await http.post("/v1/erasure", json=body, headers=ACME_ADMIN)
    assert answer.status_code == 422, answer.text
    assert named in answer.text


async def test_unknown_ids_and_unknown_callers(http: httpx.AsyncClient) -> None:
    unknown = await _erase(http, ACME_ADMIN, thread_id="x-never")
    assert unknown.status_code == 404, unknown.text
    receipt = await http.get("/v1/erasure/nope", headers=ACME_ADMIN)
    assert receipt.status_code == 404
    assert receipt.json()["detail"] == "no erasure receipt 'nope' for this tenant"
    audit = await http.get("/v1/audit/threads/x-never", headers=ACME_ADMIN)
    assert audit.status_code == 404
    assert (await http.post("/v1/erasure", json={"user": "u"})).status_code == 401
    long_id = await http.get(f"/v1/audit/threads/{'t' * 300}", headers=ACME_ADMIN)
    assert long_id.status_code == 422
    assert "the limit is 255" in long_id.text


def test_the_openapi_document_describes_erasure() -> None:
    paths = DOCUMENT["paths"]
    assert set(paths["/v1/erasure"]["post"]["responses"]) == {"201", "401", "403", "404", "422"}
    assert "get" in paths["/v1/erasure/{receipt_id}"]
    assert "get" in paths["/v1/audit/threads/{thread_id}"]
    body = DOCUMENT["components"]["schemas"]["ErasureBody"]
    assert set(body["properties"]) == {"thread_id", "tenant", "user"}
    assert body["additionalProperties"] is False
    assert {"ReceiptOut", "AuditOut", "Refusal"} <= set(DOCUMENT["components"]["schemas"])


ERASURE_OPS = schemathesis.openapi.from_dict(DOCUMENT).include(path_regex="^/v1/(erasure|audit)")
FUZZER = {"x-tether-user": "fz", "x-tether-roles": "erasure", "x-tether-tenant": "fuzzed"}


@ERASURE_OPS.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)
def test_fuzzed_erasures_by_an_eraser_are_never_a_server_error(case: Any, site: Site) -> None:
    """The suite's fuzzer sends these as a user without the role (403 after the body's
    checks); here an eraser of an otherwise empty tenant sends them, so each request
    reaches the erasure itself."""
    case.call_and_validate(
        base_url=site.base,
        headers=FUZZER,
        checks=[not_a_server_error, response_schema_conformance],
        timeout=60,
    )
