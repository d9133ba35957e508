"""``tether crashtest`` on the refund agent, on a careless agent, and on bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.backends import fresh_postgres_database
from tests.crashtest.conftest import CrashRun
from tether.cli import main
from tether.crashtest._harness import run_crashtest
from tether.crashtest._target import CrashTestError

REFUND = "tether.graphs.refund:crash_target"


def _assert_all_clean(run: CrashRun) -> None:
    assert run.returncode == 0, run.stdout + run.stderr
    s = run.summary
    assert s["boundaries"] > 10
    assert s["kills"] == s["boundaries"]
    assert s["completed"] == s["boundaries"]
    assert s["state_mismatches"] == 0
    assert s["duplicate_effects"] == 0
    assert s["reasked_model_calls"] == 0


@pytest.mark.slow
def test_refund_agent_survives_every_boundary_on_sqlite(crashtest: Any, tmp_path: Path) -> None:
    run = crashtest(REFUND, f"sqlite:///{tmp_path}/crash.db")
    _assert_all_clean(run)
    for kind in (
        "model.before",
        "model.after",
        "tool.before",
        "tool.after",
        "checkpoint.put.before",
        "checkpoint.put.after",
        "checkpoint.put_writes.before",
        "checkpoint.put_writes.after",
    ):
        assert f"killed at {kind}:1: ok" in run.stdout
    assert list(tmp_path.glob("crash-*.db")) == []  # fresh databases are cleaned up


# The crash harness's PostgreSQL runs share the server's list of databases, which the
# first test checks for leftovers: one xdist worker runs them, one after another.
ON_ONE_POSTGRES_WORKER = pytest.mark.xdist_group("crashtest-postgres-databases")


@pytest.mark.slow
@ON_ONE_POSTGRES_WORKER
def test_refund_agent_survives_every_boundary_on_postgres(
    crashtest: Any, servers: dict[str, str]
) -> None:
    import psycopg

    _assert_all_clean(crashtest(REFUND, servers["postgres"]))
    with psycopg.connect(servers["postgres"]) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'tether_crashtest_%'"
        ).fetchone()
    assert left == (0,)


GATED = "tests.crashtest.targets:gated_target"


@pytest.mark.slow
def test_refund_agent_with_the_approval_gate_on_sqlite(crashtest: Any, tmp_path: Path) -> None:
    run = crashtest(GATED, f"sqlite:///{tmp_path}/crash.db")
    _assert_all_clean(run)
    # Kills after the decision was stored, before the edited refund ran.
    assert "killed at tool.before:2: ok" in run.stdout
    assert "killed at tool.after:2: ok" in run.stdout


@pytest.mark.slow
def test_refund_agent_with_the_approval_gate_on_redis(
    crashtest: Any, servers: dict[str, str]
) -> None:
    import redis

    _assert_all_clean(crashtest(GATED, servers["redis"]))
    client = redis.Redis.from_url(servers["redis"])
    try:
        assert list(client.scan_iter(match="crashtest*")) == []  # every prefix was dropped
    finally:
        client.close()


@pytest.mark.slow
def test_harness_catches_a_careless_agent(crashtest: Any, tmp_path: Path) -> None:
    run = crashtest("tests.crashtest.targets:careless_target", f"sqlite:///{tmp_path}/crash.db")
    assert run.returncode == 1
    s = run.summary
    assert s["kills"] == s["boundaries"] > 10
    assert s["duplicate_effects"] > 0
    assert s["state_mismatches"] > 0
    assert "2 refunds where the unkilled run made 1" in run.stdout
    assert "2 emails where the unkilled run made 1" in run.stdout
    assert "working files kept in" in run.stdout


def test_an_unanswered_interrupt_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CrashTestError, match="has no 'answer'"):
        run_crashtest(
            "tests.crashtest.targets:gated_target_without_answer",
            f"sqlite:///{tmp_path}/crash.db",
            scratch=tmp_path / "s",
            progress=lambda line: None,
        )


@pytest.mark.parametrize(
    ("target", "url", "message"),
    [
        (REFUND, "memory://", "memory:// cannot be crash tested"),
        (REFUND, "sqlite:///:memory:", "name a database file"),
        (REFUND, "nosuch://x", "unknown checkpointer URL scheme"),
        (REFUND, "sqlite:////no/such/dir/x.db", "does not exist; create it first"),
        ("tether.graphs.refund", "sqlite:///x.db", "must be written MODULE:ATTR"),
        ("no_such_module_xyz:target", "sqlite:///x.db", "cannot import module"),
        ("tether.graphs.refund:nope", "sqlite:///x.db", "has no attribute 'nope'"),
        ("tests.crashtest.targets:not_a_target", "sqlite:///x.db", "is a int, not a CrashTarget"),
    ],
)
def test_bad_input_is_named(
    target: str, url: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crashtest", target, "--url", url]) == 1
    assert message in capsys.readouterr().err


def test_unreachable_server_fails_the_reference_run(tmp_path: Path) -> None:
    with pytest.raises(CrashTestError, match=r"reference run(.|\n)*cannot reach Redis"):
        run_crashtest(REFUND, "redis://127.0.0.1:1", scratch=tmp_path, progress=lambda line: None)


def test_workers_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crashtest", REFUND, "--url", "sqlite:///x.db", "--workers", "0"]) == 1
    assert "workers must be at least 1" in capsys.readouterr().err


def test_postgres_user_without_createdb(servers: dict[str, str], tmp_path: Path) -> None:
    import psycopg

    with fresh_postgres_database(servers["postgres"]) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE ROLE crashtest_nocreatedb LOGIN NOCREATEDB")
        try:
            base = url.replace("postgres@", "crashtest_nocreatedb@", 1)
            with pytest.raises(CrashTestError, match="grant it CREATEDB"):
                run_crashtest(REFUND, base, scratch=tmp_path, progress=lambda line: None)
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP ROLE crashtest_nocreatedb")


SAGA = "tether.graphs.refund:saga_crash_target"


def _assert_saga_clean(run: CrashRun) -> None:
    _assert_all_clean(run)
    assert run.summary["missing_compensations"] == 0
    for kind in ("compensation.before", "compensation.after"):
        assert f"killed at {kind}:1: ok" in run.stdout


@pytest.mark.slow
def test_refund_saga_survives_every_boundary_of_its_compensation_on_sqlite(
    crashtest: Any, tmp_path: Path
) -> None:
    _assert_saga_clean(crashtest(SAGA, f"sqlite:///{tmp_path}/crash.db"))


@pytest.mark.slow
@ON_ONE_POSTGRES_WORKER
def test_refund_saga_survives_every_boundary_of_its_compensation_on_postgres(
    crashtest: Any, servers: dict[str, str]
) -> None:
    _assert_saga_clean(crashtest(SAGA, servers["postgres"]))


@pytest.mark.slow
def test_refund_saga_survives_every_boundary_of_its_compensation_on_redis(
    crashtest: Any, servers: dict[str, str]
) -> None:
    _assert_saga_clean(crashtest(SAGA, servers["redis"]))


@pytest.mark.slow
def test_exit_durability_repeats_calls_and_effects_and_says_why(
    crashtest: Any, tmp_path: Path
) -> None:
    run = crashtest(
        "tests.crashtest.targets:exit_durability_target", f"sqlite:///{tmp_path}/crash.db"
    )
    assert run.returncode == 1
    s = run.summary
    assert s["kills"] == s["boundaries"] > 10
    # A kill after the refund: the resume starts from the input and refunds again,
    # under a new idempotency key, after asking the model again.
    assert s["duplicate_effects"] > 0
    assert s["reasked_model_calls"] > 0
    assert "2 refunds where the unkilled run made 1" in run.stdout
    assert "durability='exit' stores nothing until the run ends" in run.stdout
