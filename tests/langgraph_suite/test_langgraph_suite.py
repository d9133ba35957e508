"""LangGraph's own persistence tests (its released ``tests/``) on tether's checkpointers.

One test per variant runs the whole file set in a child pytest (see
:mod:`tests.langgraph_suite.runner`) and fails on any failed or hung test,
listing them. ``TETHER_LANGGRAPH_VARIANTS`` picks the variants: by default the
ones ``scripts/test`` runs; ``scripts/test-langgraph-full`` passes ``full``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.langgraph_suite.runner import (
    EXPECTED_TESTS,
    RUN_TIMEOUT,
    run_variant,
    selected_variants,
)
from tests.langgraph_suite.source import SuiteUnavailableError, langgraph_version, suite_root
from tests.langgraph_suite.summary import record_summary


@pytest.fixture(scope="session")
def langgraph_tests() -> Path:
    """The extracted test tree of the installed LangGraph (fetched on first use)."""
    try:
        return suite_root()
    except SuiteUnavailableError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"LangGraph's tests are unavailable (set CI=1 to make this fatal): {exc}")


@pytest.mark.timeout(RUN_TIMEOUT + 300)
@pytest.mark.parametrize("variant", selected_variants())
def test_langgraph_suite(
    variant: str,
    langgraph_tests: Path,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    backend = variant.partition("+")[0]
    servers = request.getfixturevalue("servers") if backend in {"postgres", "redis"} else {}
    result = run_variant(variant, langgraph_tests, servers, tmp_path)
    record_summary(tmp_path_factory, result)

    where = f"(child log: {result.log})"
    assert result.problems() == [], (
        f"{variant}: {len(result.problems())} of LangGraph's tests failed or hung {where}:\n"
        + "\n".join(result.problems())
    )
    expected = EXPECTED_TESTS.get(langgraph_version())
    assert expected is not None, f"record the test count of langgraph {langgraph_version()}"
    assert len(result.outcomes) == expected, (
        f"{variant}: {len(result.outcomes)} tests ran, LangGraph {langgraph_version()} has "
        f"{expected} that take a checkpointer {where}"
    )
    assert result.count("skipped") == 0, f"{variant}: some tests were skipped {where}"
    assert result.savers, f"{variant}: no saver was handed out {where}"
    assert all(s.startswith("tether.") for s in result.savers), result.savers
    encrypted = {s.endswith(".EncryptedSaver") for s in result.savers}
    assert encrypted == {variant.endswith("+enc")}, result.savers
    assert result.exited_cleanly, f"{variant}: child pytest exited {result.returncode} {where}"
