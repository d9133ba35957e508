"""Worker processes for the runtime's tests: real ``tether worker`` OS processes.

Each worker is started in its own session and stopped by PID, so a test can
kill -9, SIGSTOP, SIGCONT or SIGTERM one of them exactly as an operator or a
crash would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PROJECT = Path(__file__).parent / "project" / "langgraph.json"


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
        extra_args: tuple[str, ...] = (),
    ) -> list[int]:
        """Start ``n`` more workers; returns their indexes."""
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
                        *extra_args,
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


def _status_field(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/status has no {name}")
