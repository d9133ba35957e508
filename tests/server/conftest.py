"""A real ``tether serve`` process per backend, and the official SDK client for it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import fresh_postgres_database

PROJECT = Path(__file__).parent / "project" / "langgraph.json"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def serve(url: str | None, workdir: Path, *extra: str) -> Iterator[str]:
    """``tether serve`` on a free port; yields its base URL; stops it by PID."""
    port = _free_port()
    command = [sys.executable, "-m", "tether", "serve", "--config", str(PROJECT)]
    command += ["--port", str(port), "--log-level", "warning", *extra]
    if url is not None:
        command += ["--url", url]
    log = workdir / f"serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"tether serve exited:\n{log.read_text()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{base}/ok", timeout=1) as answer,
            ):
                if answer.status == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"tether serve never answered /ok:\n{log.read_text()}")
            time.sleep(0.1)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The base URL of a ``tether serve`` on a fresh run store (shared by a module's tests,
    each of which uses threads of its own)."""
    workdir = tmp_path_factory.mktemp("serve")
    if request.param == "sqlite":
        with serve(f"sqlite:///{workdir / 'runtime.db'}", workdir) as base:
            yield base
        return
    servers = request.getfixturevalue("servers")
    with fresh_postgres_database(servers["postgres"]) as url, serve(url, workdir) as base:
        yield base
