"""A store that is briefly unavailable is a 503 with Retry-After, never a 500, and passes.

PostgreSQL drops every connection (a restart, a failover): the server's pooled
connections are dead, and the requests that meet one are answered 503; the
pool replaces them and the next requests succeed. SQLite's write lock held
past the busy timeout by another process is the same 503.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.backends import drop_postgres_connections, sqlite_write_lock
from tests.server.conftest import serving

pytestmark = pytest.mark.slow


def _no_server_errors_logged(log: Path) -> None:
    text = log.read_text(errors="replace")
    assert "Exception in ASGI application" not in text, text
    assert "store unavailable" in text, text


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_dropped_postgresql_connections_are_503s_until_the_pool_has_new_ones(
    store_url: str, tmp_path: Path
) -> None:
    with (
        serving(store_url, tmp_path, "--workers", "0") as server,
        httpx.Client(base_url=server.base, timeout=30) as http,
    ):
        thread = http.post("/threads", json={}).json()["thread_id"]
        assert drop_postgres_connections(store_url) >= 1
        answers = [http.get(f"/threads/{thread}") for _ in range(12)]
        codes = [a.status_code for a in answers]
        assert set(codes) <= {200, 503}, codes
        unavailable = [a for a in answers if a.status_code == 503]
        assert unavailable, codes
        assert unavailable[0].headers["retry-after"] == "1"
        assert "the run store is unavailable" in unavailable[0].json()["detail"]
        assert codes[-1] == 200, codes
        _no_server_errors_logged(server.log)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_the_sqlite_write_lock_held_past_the_busy_timeout_is_a_503(
    store_url: str, tmp_path: Path
) -> None:
    with (
        serving(store_url, tmp_path, "--workers", "0") as server,
        httpx.Client(base_url=server.base, timeout=30) as http,
    ):
        assert http.post("/threads", json={}).status_code == 200
        with sqlite_write_lock(store_url):
            held = http.post("/threads", json={})
        assert held.status_code == 503, held.text
        assert "database is locked" in held.json()["detail"]
        assert held.headers["retry-after"] == "1"
        assert http.post("/threads", json={}).status_code == 200
        _no_server_errors_logged(server.log)
