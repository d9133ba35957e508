"""``tether serve`` refuses bad options with one clear line, before serving anything."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx

from tests.server.conftest import PROJECT, serving


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--config", str(PROJECT), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_an_unknown_store_scheme_is_named(tmp_path: Path) -> None:
    done = _serve("--url", "mysql://db/app", cwd=tmp_path)
    assert done.returncode == 1
    assert "scheme 'mysql'" in done.stderr
    assert "postgresql://" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_project_is_named(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--config", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "nope.json" in done.stderr


def test_negative_workers_are_refused(tmp_path: Path) -> None:
    done = _serve("--workers", "-1", cwd=tmp_path)
    assert done.returncode == 2
    assert "--workers must be 0 or more" in done.stderr


def test_a_body_limit_that_is_not_a_positive_size_is_refused(tmp_path: Path) -> None:
    for bad in ("0", "-1", "nan"):
        done = _serve("--max-body-mb", bad, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "--max-body-mb must be a positive size" in done.stderr


def test_a_body_over_the_limit_is_a_413_and_nothing_is_stored(tmp_path: Path) -> None:
    """A 100 MB thread metadata was stored, and sent back on every search that listed it."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with serving(url, tmp_path, "--max-body-mb", "1") as server:
        big = {"metadata": {"blob": "x" * (2 * 2**20)}}
        with httpx.Client(base_url=server.base, timeout=60) as http:
            stated = http.post("/threads", json=big)
            assert stated.status_code == 413, stated.text
            assert "at most 1048576" in stated.json()["detail"]
            chunks = (b"x" * 65536 for _ in range(40))  # no Content-Length: chunked
            streamed = http.post(
                "/threads", content=chunks, headers={"content-type": "application/json"}
            )
            assert streamed.status_code == 413, streamed.text
            assert http.post("/threads/search", json={"limit": 100}).json() == []
            small = http.post("/threads", json={"metadata": {"blob": "x" * 1000}})
            assert small.status_code == 200, small.text


async def test_serve_on_sqlite_needs_only_the_server_extra(tmp_path: Path) -> None:
    """It did not: the API keys module imported PostgreSQL's driver, so `tether serve`
    on the embedded SQLite store said the server extra was missing (``None is missing``)."""
    from langgraph_sdk import get_client

    from tests.extras import DATABASES, env_without, run_without

    env = env_without(DATABASES, tmp_path)
    probe = run_without(DATABASES, tmp_path, "-c", "import psycopg")
    assert "No module named 'psycopg'" in probe.stderr  # the drivers are missing there
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with serving(url, tmp_path, env=env) as process:
        client = get_client(url=process.base)
        out = await client.runs.wait(None, "echo", input={"text": "core"})
        assert out["text"] == "core"


def test_a_port_in_use_is_named_before_any_worker_starts(tmp_path: Path) -> None:
    """It was not: the in-process worker started and registered, then the server stopped."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    store = tmp_path / "runs.db"
    try:
        done = _serve("--url", f"sqlite:///{store}", "--no-auth", "--port", str(port), cwd=tmp_path)
    finally:
        taken.close()
    assert done.returncode == 1, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
    with sqlite3.connect(store) as db:
        (workers,) = db.execute("SELECT COUNT(*) FROM tether_workers").fetchone()
    assert workers == 0
