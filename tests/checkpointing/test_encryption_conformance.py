"""LangGraph's conformance suite passes in full with encryption on, on every backend."""

from __future__ import annotations

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES, DetectedCapabilities

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring
from tether.checkpointing._encrypted import EncryptedSaver


async def test_full_conformance_with_encryption(backend: Backend) -> None:
    keys = ring("k1")

    @checkpointer_test(name=f"tether-{backend.name}-encrypted")
    async def factory():  # type: ignore[no-untyped-def]
        async with backend.open(encryption=keys) as saver:
            assert isinstance(saver, EncryptedSaver)
            yield saver

    async with backend.open(encryption=keys) as saver:
        detected = DetectedCapabilities.from_instance(saver)
    report = await validate(factory)

    absent = sorted(c.value for c in ALL_CAPABILITIES - detected.detected)
    failures = [f for r in report.results.values() for f in (r.failures or [])]
    assert absent == [], f"{backend.name} lacks capabilities {absent}"
    assert failures == [], "\n".join(failures)
    assert report.passed_all()
    assert sum(r.tests_passed for r in report.results.values()) >= 66
