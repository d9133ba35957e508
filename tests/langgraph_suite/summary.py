"""The per-variant summary printed at the end of the test run, beside conformance's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.langgraph_suite.runner import FULL, SuiteResult

__all__ = ["record_summary", "write_summary"]

TITLE = "LangGraph's own persistence tests (released tests/ of the installed version)"


def _summary_dir(factory: pytest.TempPathFactory) -> Path:
    """A directory shared by all pytest-xdist workers and the controller."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    path = base / "langgraph-suite"
    path.mkdir(exist_ok=True)
    return path


def record_summary(factory: pytest.TempPathFactory, result: SuiteResult) -> None:
    """Keep ``result``'s summary line and failing tests for :func:`write_summary`."""
    named = result.named("failed", "hung", "flaky")
    lines = [result.summary_line(), *(f"    {line}" for line in named)]
    (_summary_dir(factory) / result.variant).write_text("\n".join(lines))


def write_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print every recorded variant, in the order of :data:`FULL`."""
    factory = terminalreporter.config._tmp_path_factory  # type: ignore[attr-defined]
    folder = _summary_dir(factory)
    found = {p.name: p.read_text() for p in folder.iterdir()}
    if not found:
        return
    terminalreporter.section(TITLE)
    for variant in sorted(found, key=lambda v: FULL.index(v) if v in FULL else len(FULL)):
        terminalreporter.write_line(found[variant])
