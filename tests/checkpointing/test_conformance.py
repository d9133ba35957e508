"""LangGraph's official conformance suite, in full, on every backend open_checkpointer serves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES, DetectedCapabilities

from tests.backends import Backend


def summary_dir(factory: pytest.TempPathFactory) -> Path:
    """A directory shared by all pytest-xdist workers and the controller."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    path = base / "conformance"
    path.mkdir(exist_ok=True)
    return path


async def test_full_conformance(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> None:
    @checkpointer_test(name=f"tether-{backend.name}")
    async def factory():  # type: ignore[no-untyped-def]
        async with backend.open() as saver:
            yield saver

    async with backend.open() as saver:
        detected = DetectedCapabilities.from_instance(saver)
    report = await validate(factory)

    passed = sum(r.tests_passed for r in report.results.values())
    failed = sum(r.tests_failed for r in report.results.values())
    absent = sorted(c.value for c in ALL_CAPABILITIES - detected.detected)
    failures = [f for r in report.results.values() for f in (r.failures or [])]
    (summary_dir(tmp_path_factory) / backend.name).write_text(
        f"{backend.name:<9} passed={passed:<3} failed={failed:<2} "
        f"absent capabilities={len(absent)}{' ' + str(absent) if absent else ''}"
    )

    assert absent == [], f"{backend.name} lacks capabilities {absent}"
    assert failures == [], "\n".join(failures)
    assert report.passed_all()
    assert passed >= 66
