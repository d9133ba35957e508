"""Session-wide servers and per-test backends (see ``tests/backends.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import BACKENDS, Backend, fresh_backend, server_urls
from tether.testing.services import Services


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[str, str]]:
    """URLs of the real PostgreSQL, Redis (with modules) and bare Redis servers.

    Uses the servers the test command started; otherwise starts them for this
    session. Under CI a server that cannot start is an error, never a skip.
    """
    urls = server_urls()
    if {"postgres", "redis", "redis_bare"} <= urls.keys():
        yield urls
        return
    try:
        with Services() as services:
            services.start_all()
            yield dict(services.urls)
    except Exception as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"test servers could not start (set CI=1 to make this fatal): {exc}")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each of memory, sqlite, postgres and redis, isolated for this test."""
    name: str = request.param
    urls = request.getfixturevalue("servers") if name in {"postgres", "redis"} else {}
    with fresh_backend(name, urls, tmp_path) as b:
        yield b


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def durable_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The backends whose state outlives the process (for cross-process tests)."""
    name: str = request.param
    urls = request.getfixturevalue("servers") if name in {"postgres", "redis"} else {}
    with fresh_backend(name, urls, tmp_path) as b:
        yield b


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the per-backend conformance and LangGraph-suite summaries at the end of the run."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    from tests.checkpointing.test_conformance import summary_dir
    from tests.langgraph_suite.summary import write_summary

    factory = terminalreporter.config._tmp_path_factory  # type: ignore[attr-defined]
    lines = sorted(p.read_text() for p in summary_dir(factory).iterdir())
    if lines:
        terminalreporter.section("LangGraph checkpoint conformance (official suite)")
        for line in lines:
            terminalreporter.write_line(line)
    write_summary(terminalreporter)
