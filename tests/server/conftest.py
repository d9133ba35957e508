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
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.backends import fresh_postgres_database

PROJECT = Path(__file__).parent / "project" / "langgraph.json"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ServeProcess:
    """One ``tether serve`` OS process (restartable on the same port), stopped by PID."""

    url: str | None
    workdir: Path
    extra: tuple[str, ...] = ()
    project: Path = PROJECT
    env: dict[str, str] = field(default_factory=dict)
    auth: tuple[str, ...] = ("--no-auth",)  # () for the project's auth or API keys
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / f"serve-{self.port}-{self.starts}.log"

    def start(self) -> str:
        """Start the server and wait until it answers ``/ok``; returns its base URL."""
        self.starts += 1
        command = [sys.executable, "-m", "tether", "serve", "--config", str(self.project)]
        command += ["--port", str(self.port), "--log-level", "warning", *self.auth, *self.extra]
        if self.url is not None:
            command += ["--url", self.url]
        env = {k: v for k, v in os.environ.items() if k != "TETHER_URL"} | self.env
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"tether serve exited:\n{self.log.read_text()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.base}/ok", timeout=1) as answer,
            ):
                if answer.status == 200:
                    return self.base
            if time.monotonic() > deadline:
                raise AssertionError(f"tether serve never answered /ok:\n{self.log.read_text()}")
            time.sleep(0.1)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Stop the server (SIGKILL by default: a crash, connections cut mid-stream)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)


@contextlib.contextmanager
def serving(
    url: str | None,
    workdir: Path,
    *extra: str,
    project: Path = PROJECT,
    env: dict[str, str] | None = None,
) -> Iterator[ServeProcess]:
    process = ServeProcess(url, workdir, extra, project=project, env=env or {})
    try:
        process.start()
        yield process
    finally:
        process.stop()


def _store_url(
    request: pytest.FixtureRequest, backend: str, workdir: Path
) -> contextlib.AbstractContextManager[str]:
    if backend == "sqlite":
        return contextlib.nullcontext(f"sqlite:///{workdir / 'runtime.db'}")
    return fresh_postgres_database(request.getfixturevalue("servers")["postgres"])


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The base URL of a ``tether serve`` with an in-process worker on a fresh run store
    (shared by a module's tests, each of which uses threads of its own)."""
    workdir = tmp_path_factory.mktemp("serve")
    with _store_url(request, request.param, workdir) as url, serving(url, workdir) as process:
        yield process.base


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh run store for one test."""
    with _store_url(request, request.param, tmp_path) as url:
        yield url
