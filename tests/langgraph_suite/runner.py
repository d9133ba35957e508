"""Run LangGraph's own persistence tests against one tether variant, in a child pytest.

A child process is needed because LangGraph's test tree is a package named
``tests``, like ours: the two cannot be imported into one interpreter. The
child's root is the extracted sdist, its settings are LangGraph's own
``pyproject.toml``, and ``tether_langgraph_fixtures`` (in ``inner/``) points
the checkpointer fixtures at the variant. Each test that finishes is appended
to a JSON-lines report, so even a child that has to be stopped says how far it got.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.langgraph_suite.source import CACHE, suite_files
from tether.testing.services import ENV_POSTGRES, ENV_REDIS, ENV_REDIS_BARE

__all__ = [
    "EXPECTED_TESTS",
    "FULL",
    "MAIN",
    "SuiteResult",
    "run_variant",
    "selected_variants",
]

# The variants `scripts/test` runs: every persistent backend once, and
# encryption once, on SQLite (the encryption layer is the same on every
# backend, and SQLite is where leaked listings showed). `memory://` is
# LangGraph's own InMemorySaver (tether adds pruning and run deletion, which the
# conformance suite covers), so it is left to `scripts/test-langgraph-full`,
# which also adds encryption on the others; PostgreSQL's is the slowest variant
# of all. See docs/checkpointing.md.
MAIN = ("sqlite", "sqlite+enc", "postgres", "redis")
FULL = ("memory", *MAIN, "postgres+enc", "memory+enc", "redis+enc")

# Tests per variant that take a checkpointer, by LangGraph version: a run that
# collects fewer has lost tests (a renamed fixture, a failed swap), not passed.
EXPECTED_TESTS = {"1.2.24": 648}

INNER = Path(__file__).resolve().parent / "inner"
LOGS = CACHE / "logs"
PLUGIN = "tether_langgraph_fixtures"
TEST_TIMEOUT = float(os.environ.get("TETHER_LANGGRAPH_TIMEOUT", "60"))
# A backstop for a child that hangs outside any test (pytest-timeout covers
# each test's setup, call and teardown): it is stopped after this many seconds.
RUN_TIMEOUT = float(os.environ.get("TETHER_LANGGRAPH_RUN_TIMEOUT", "1800"))


def selected_variants() -> tuple[str, ...]:
    """The variants named by ``TETHER_LANGGRAPH_VARIANTS``: ``main`` (default), ``full``,
    or a comma-separated list such as ``sqlite,redis+enc``."""
    wanted = os.environ.get("TETHER_LANGGRAPH_VARIANTS", "main").strip()
    if wanted in {"main", ""}:
        return MAIN
    if wanted == "full":
        return FULL
    names = tuple(v.strip() for v in wanted.split(",") if v.strip())
    unknown = [v for v in names if v not in FULL]
    if unknown:
        raise ValueError(
            f"TETHER_LANGGRAPH_VARIANTS names unknown variant(s) {unknown}; "
            f"known: main, full, {', '.join(FULL)}"
        )
    return names


@dataclass
class SuiteResult:
    """What one child run reported."""

    variant: str
    outcomes: dict[str, str]
    savers: set[str]
    returncode: int | None
    seconds: float
    log: Path

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def named(self, *kinds: str) -> list[str]:
        """``outcome  test id`` for every test whose outcome is one of ``kinds``, sorted."""
        return [f"{o:<6} {t}" for t, o in sorted(self.outcomes.items()) if o in kinds]

    def problems(self) -> list[str]:
        """The tests that failed (twice) or hung."""
        return self.named("failed", "hung")

    @property
    def exited_cleanly(self) -> bool:
        """The last child of the first pass ended on its own: with 0, or with 1
        because some test did not pass (not stopped by the backstop, no crash)."""
        ok = {0, 1} if set(self.outcomes.values()) - {"passed", "skipped"} else {0}
        return self.returncode in ok

    def summary_line(self) -> str:
        counts = Counter(self.outcomes.values())
        return (
            f"{self.variant:<13} passed={counts['passed']:<4} failed={counts['failed']:<3} "
            f"hung={counts['hung']:<3} flaky={counts['flaky']:<3} "
            f"skipped={counts['skipped']:<3} ({self.seconds:.0f}s)"
        )


def _child_env(variant: str, servers: dict[str, str]) -> dict[str, str]:
    # Our own pytest's variables (xdist worker ids, PYTEST_ADDOPTS) must not
    # reach the child, which is a separate session with its own settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(
        {
            "PYTHONPATH": str(INNER),
            # LangGraph's conftest then keeps its cache and store fixtures off
            # the localhost Docker services it would otherwise expect.
            "NO_DOCKER": "true",
            "TETHER_LANGGRAPH_VARIANT": variant,
        }
    )
    names = {"postgres": ENV_POSTGRES, "redis": ENV_REDIS, "redis_bare": ENV_REDIS_BARE}
    env.update({names[k]: url for k, url in servers.items() if k in names})
    return env


def _command(root: Path, workdir: Path) -> list[str]:
    return [
        sys.executable, "-m", "pytest",
        "-c", str(root / "pyproject.toml"), "--rootdir", str(root),
        # LangGraph's addopts add --full-trace, which makes a failure pages
        # long; the rest of them are repeated here.
        "-o", "addopts=", "--strict-markers", "--strict-config", "--snapshot-warn-unused",
        "-p", PLUGIN, "-p", "no:cacheprovider",
        # LangGraph's async tests run under anyio; pytest-asyncio (ours) stays out.
        "-p", "no:asyncio",
        "--timeout", f"{TEST_TIMEOUT:g}", "--timeout-method", "thread",
        "--basetemp", str(workdir / "tmp"),
        "-q", "-rfE", "--tb=short",
        *(str(p.relative_to(root)) for p in suite_files(root)),
    ]  # fmt: skip


def run_variant(variant: str, root: Path, servers: dict[str, str], workdir: Path) -> SuiteResult:
    """Run the suite in ``root`` against ``variant``; the children's output goes to a log.

    pytest-timeout (thread method) ends a child that hangs in a test, whatever
    the hang swallows; the test counts as hung and a new child runs the tests
    not run yet, so one hang costs one test, not the rest of the variant.

    A test that fails is run once more, alone, in a new child: a few of
    LangGraph's tests race short sleeps against each other and can lose on a
    busy machine. One that passes then is reported as flaky, by name; one that
    fails again stays failed. A hang is never retried.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    # Kept beside the fetched tests, where pytest's rotation of old temp folders
    # does not delete it the moment another run starts.
    log = LOGS / f"{variant}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    started = time.monotonic()
    env = _child_env(variant, servers)
    first = _run_pass(env, _command(root, workdir), root, workdir, log=log, name="run")
    outcomes = dict(first.outcomes)
    if failed := sorted(t for t, o in outcomes.items() if o == "failed"):
        again = _run_pass(
            env, _command(root, workdir), root, workdir, log=log, name="rerun", only=failed
        )
        outcomes.update({t: "flaky" for t in failed if again.outcomes.get(t) == "passed"})
    return SuiteResult(
        variant, outcomes, first.savers, first.returncode, time.monotonic() - started, log
    )


@dataclass
class _Pass:
    outcomes: dict[str, str]
    savers: set[str]
    returncode: int | None


def _run_pass(
    env: dict[str, str],
    command: list[str],
    root: Path,
    workdir: Path,
    *,
    log: Path,
    name: str,
    only: list[str] | None = None,
) -> _Pass:
    """Children until every selected test has an outcome (each hang ends one child)."""
    report, done, chosen = (workdir / f"{name}-{part}" for part in ("report.jsonl", "done", "only"))
    for path in (report, done, chosen):
        path.unlink(missing_ok=True)
    env = {**env, "TETHER_LANGGRAPH_REPORT": str(report), "TETHER_LANGGRAPH_DONE": str(done)}
    if only is not None:
        chosen.write_text("".join(f"{test}\n" for test in only))
        env["TETHER_LANGGRAPH_ONLY"] = str(chosen)
    while True:
        returncode = _run_child(command, root, env, log)
        outcomes, savers, unfinished = _read_report(report)
        if not unfinished:
            return _Pass(outcomes, savers, returncode)
        # The child died inside these tests: they hung. A new child runs the rest.
        with report.open("a") as out:
            out.writelines(json.dumps({"test": t, "outcome": "hung"}) + "\n" for t in unfinished)
        done.write_text("".join(f"{test}\n" for test in [*outcomes, *unfinished]))


def _run_child(command: list[str], root: Path, env: dict[str, str], log: Path) -> int | None:
    """One child pytest; ``None`` if the backstop had to stop it."""
    with log.open("a") as out:
        child = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so the backstop can stop it and its children
        )
        try:
            return child.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return None


def _read_report(report: Path) -> tuple[dict[str, str], set[str], list[str]]:
    """Outcomes by test id, saver classes seen, and tests started but never finished."""
    outcomes: dict[str, str] = {}
    savers: set[str] = set()
    started: list[str] = []
    if report.exists():
        for line in report.read_text().splitlines():
            entry = json.loads(line)
            if "started" in entry:
                started.append(entry["started"])
            elif "saver" in entry:
                savers.add(entry["saver"])
            else:
                outcomes[entry["test"]] = entry["outcome"]
    return outcomes, savers, [t for t in started if t not in outcomes]
