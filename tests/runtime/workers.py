"""Worker processes for the runtime's tests: real ``tether worker`` OS processes.

Each worker is started in its own session and stopped by PID, so a test can
kill -9, SIGSTOP, SIGCONT or SIGTERM one of them exactly as an operator or a
crash would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.runtime import Worker

PROJECT = Path(__file__).parent / "project" / "langgraph.json"


@contextlib.asynccontextmanager
async def in_process_worker(url: str, **options: Any) -> AsyncIterator[Worker]:
    """A :class:`Worker` of the test project serving in this process's loop, stopped at exit."""
    running = Worker(url, PROJECT, concurrency=2, lease=2.0, **options)
    serving = asyncio.create_task(running.run())
    try:
        yield running
    finally:
        running.stop(grace=False)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(serving, 30)


@dataclass
class Workers:
    """``tether worker`` processes on one run store."""

    url: str
    workdir: Path
    project: Path = PROJECT
    lease: float = 2.0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def start(
        self,
        n: int = 1,
        *,
        concurrency: int = 4,
        extra_env: dict[str, str] | None = None,
        extra_args: Sequence[str] | None = None,
    ) -> list[int]:
        """Start ``n`` more workers (``extra_args`` added to the command); returns their indexes."""
        env = {**os.environ, "TETHER_TEST_WORKDIR": str(self.workdir), **(extra_env or {})}
        started = []
        for _ in range(n):
            index = len(self.procs)
            log = self.workdir / f"worker{index}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tether",
                        "worker",
                        "--url",
                        self.url,
                        "--config",
                        str(self.project),
                        "--lease",
                        str(self.lease),
                        "--concurrency",
                        str(concurrency),
                        "--worker-id",
                        f"w{index}",
                        "--shutdown-grace",
                        "10",
                        *(extra_args or ()),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            self.procs.append(proc)
            self.logs.append(log)
            started.append(index)
        return started

    def pid(self, index: int) -> int:
        return self.procs[index].pid

    def signal(self, index: int, sig: int) -> None:
        os.kill(self.procs[index].pid, sig)

    def stop(self, index: int) -> None:
        """SIGSTOP worker ``index`` at a moment it is inside no SQLite write transaction.

        SQLite has no server: a process stopped inside a commit keeps the
        file's one write lock, and every other process on the file waits for
        it until it continues. So on SQLite the worker is stopped, and if it
        holds the lock it is continued and stopped again. PostgreSQL needs no
        care: the server aborts a stopped client's transaction (tether sets
        ``idle_in_transaction_session_timeout``).
        """
        for _ in range(200):
            self.signal(index, signal.SIGSTOP)
            _wait_stopped(self.procs[index].pid)
            if not self.url.startswith(_SQLITE) or _write_lock_free(self.url[len(_SQLITE) :]):
                return
            self.signal(index, signal.SIGCONT)
            time.sleep(0.01)
        raise AssertionError(f"worker {index} held the SQLite write lock at every stop")

    def kill9(self, index: int) -> None:
        self.signal(index, signal.SIGKILL)
        self.procs[index].wait(10)

    def log(self, index: int) -> str:
        return self.logs[index].read_text(errors="replace")

    def wait_log(self, index: int, text: str, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.log(index):
                return
            if self.procs[index].poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"worker {index} never logged {text!r}; its log:\n{self.log(index)}")

    def wait_ready(self, indexes: Sequence[int], timeout: float = 60) -> None:
        """Until each of ``indexes`` has registered and is claiming (it logs its graphs)."""
        for index in indexes:
            self.wait_log(index, f"worker w{index}: graphs", timeout)

    def rss_kb(self, index: int) -> int:
        return _status_field(self.procs[index].pid, "VmRSS")

    def threads(self, index: int) -> int:
        return _status_field(self.procs[index].pid, "Threads")

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)


_SQLITE = "sqlite:///"


def _wait_stopped(pid: int) -> None:
    """Until every thread of ``pid`` is stopped (SIGSTOP is delivered asynchronously)."""
    for _ in range(1000):
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):
                states.append((task / "stat").read_text().rpartition(")")[2].split()[0])
        if all(state in ("T", "t") for state in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} did not stop")


def _write_lock_free(path: str) -> bool:
    """Whether a write transaction can start on the SQLite file (live writers are waited for)."""
    db = sqlite3.connect(path, timeout=1, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()


def _status_field(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/status has no {name}")
