"""Shared parts of the runtime benchmarks: worker processes, databases, figures.

The benchmarks run real ``tether worker`` OS processes on the project in
``runtime_project/`` and drive them from this process through :class:`Runtime`.
A worker can also run *without* notifications (``notify=False``): it then
finds new and resumed runs only by polling, every ``lease / 4`` seconds, the
fallback it uses when a notification is missed. ``tether worker`` has no
option for that, so such a worker is started through this module
(``python bench/_runtime.py poll-worker ARGS``), which replaces the worker's
notifier with one that delivers only its own in-process signals.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _servers import bench_postgres

from tether.runtime import Run, Runtime

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "runtime_project" / "langgraph.json"
GRAPHS = ("three_node", "ask", "hold", "pay_then_wait")


# -- databases -----------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_databases(count: int = 1) -> Iterator[list[str]]:
    """``count`` empty databases on one PostgreSQL server, dropped afterwards."""
    import psycopg

    with bench_postgres() as server:
        names = [f"bench_{uuid.uuid4().hex[:12]}" for _ in range(count)]
        with psycopg.connect(server, autocommit=True) as conn:
            for name in names:
                conn.execute(f'CREATE DATABASE "{name}"')
        base = server.rpartition("/")[0]
        try:
            yield [f"{base}/{name}" for name in names]
        finally:
            with psycopg.connect(server, autocommit=True) as conn:
                for name in names:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.asynccontextmanager
async def open_runtime(url: str) -> AsyncIterator[Runtime]:
    """A :class:`Runtime` on ``url`` with the bench project's assistants registered.

    It also creates the checkpoint tables: workers started together on a fresh
    database would otherwise each run LangGraph's ``setup()`` at once, and all
    but one can fail on its migrations table (a unique violation).
    """
    async with Runtime(url, graphs=GRAPHS) as runtime:
        await runtime.checkpointer()
        yield runtime


# -- worker processes ----------------------------------------------------------------------


@dataclass
class Workers:
    """``tether worker`` processes on one run store, stopped by PID."""

    url: str
    workdir: Path
    lease: float = 2.0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def start(self, n: int = 1, *, concurrency: int = 10, notify: bool = True) -> list[int]:
        """Start ``n`` more workers and wait until each has registered; their indexes."""
        env = {**os.environ, "TETHER_BENCH_WORKDIR": str(self.workdir)}
        command = (
            [sys.executable, "-m", "tether", "worker"]
            if notify
            else [sys.executable, str(Path(__file__).resolve()), "poll-worker"]
        )
        started = []
        for _ in range(n):
            index = len(self.procs)
            log = self.workdir / f"worker{index}.log"
            with log.open("wb") as out:
                self.procs.append(
                    subprocess.Popen(
                        [
                            *command,
                            *("--url", self.url, "--config", str(PROJECT)),
                            *("--lease", str(self.lease), "--concurrency", str(concurrency)),
                            *("--worker-id", f"w{index}", "--shutdown-grace", "5"),
                        ],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )
            self.logs.append(log)
            started.append(index)
        for index in started:
            self.wait_log(index, f"worker w{index}: graphs")
        return started

    def pid(self, index: int) -> int:
        return self.procs[index].pid

    def log(self, index: int) -> str:
        return self.logs[index].read_text(errors="replace")

    def wait_log(self, index: int, text: str, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.log(index):
                return
            if self.procs[index].poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"worker {index} never logged {text!r}; its log:\n{self.log(index)}")

    def kill9(self, index: int) -> None:
        os.kill(self.procs[index].pid, signal.SIGKILL)
        self.procs[index].wait(10)

    def status(self, index: int) -> dict[str, int]:
        """``VmRSS`` (kB) and ``Threads`` of a worker, from ``/proc/PID/status``."""
        wanted = {"VmRSS", "Threads"}
        found = {}
        for line in Path(f"/proc/{self.pid(index)}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in wanted:
                found[name] = int(value.split()[0])
        return found

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)


@contextlib.contextmanager
def worker_pool(url: str, workdir: Path, *, lease: float = 2.0) -> Iterator[Workers]:
    """:class:`Workers` on ``url``, every one killed on exit."""
    pool = Workers(url, workdir, lease=lease)
    try:
        yield pool
    finally:
        pool.stop_all()


# -- driving runs --------------------------------------------------------------------------


async def batched(
    items: Iterable[Any], call: Callable[[Any], Awaitable[Any]], size: int = 50
) -> list[Any]:
    """``call`` on every item, ``size`` at a time; the results in order."""
    pending = list(items)
    results: list[Any] = []
    for start in range(0, len(pending), size):
        results += await asyncio.gather(*(call(item) for item in pending[start : start + size]))
    return results


async def wait_all(runtime: Runtime, run_ids: Iterable[str], status: str) -> list[Run]:
    """Every run once it has stopped; fails unless each is ``status``."""
    runs = []
    for run_id in run_ids:
        run = await runtime.wait(run_id, timeout=300)
        if run.status != status:
            raise RuntimeError(f"run {run_id} is {run.status}, not {status}: {run.error}")
        runs.append(run)
    return runs


# -- figures -------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(1, round(p / 100 * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: list[float]) -> float:
    return statistics.median(values)


def machine() -> str:
    """One line on what the figures were measured on."""
    load = os.getloadavg()[0]
    return f"{os.cpu_count()} CPUs (shared), load average {load:.2f} at start"


# -- a worker without notifications --------------------------------------------------------


def _poll_worker(argv: list[str]) -> int:
    """``tether worker ARGS`` whose notifier carries no signal from other processes."""
    from tether.cli import main
    from tether.runtime import notify, worker

    def in_process_only(url: str, store: Any) -> notify.Notifier:
        return notify.Notifier()

    worker.notifier_for = in_process_only
    return main(["worker", *argv])


if __name__ == "__main__":
    if sys.argv[1:2] != ["poll-worker"]:
        raise SystemExit("usage: python bench/_runtime.py poll-worker [tether worker options]")
    raise SystemExit(_poll_worker(sys.argv[2:]))
