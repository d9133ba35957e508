"""Shared parts of the server benchmarks: ``tether serve`` and ``langgraph dev`` as processes.

Both serve the bench project (``runtime_project/langgraph.json``) on a free
local port and are driven through the official ``langgraph_sdk`` client.
``langgraph dev`` is LangGraph's in-memory development server (the bench
extra installs it: ``pip install -e '.[bench]'``); when it cannot start here,
:func:`langgraph_dev` raises :class:`Unavailable` with the reason, and the
benchmarks print it and run the other peers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from _runtime import PROJECT


class Unavailable(RuntimeError):
    """A peer server that cannot run on this machine (the message says why)."""


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float) -> None:
    """Wait until ``url`` answers 200; fail with the server's log if it exits or never does."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise Unavailable(f"exited with {proc.returncode}; its log:\n{_tail(log)}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status == 200:
                return
        time.sleep(0.1)
    raise Unavailable(f"not ready after {timeout:.0f} s; its log:\n{_tail(log)}")


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group (it was started in its own), SIGKILL if it lingers."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextlib.contextmanager
def _server(
    command: list[str], health: str, workdir: Path, name: str, timeout: float
) -> Iterator[subprocess.Popen[bytes]]:
    log = workdir / f"{name}.log"
    env = {
        **os.environ,
        "TETHER_BENCH_WORKDIR": str(workdir),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
            start_new_session=True,
        )
    try:
        _wait_ready(proc, health, log, timeout)
        yield proc
    finally:
        _stop(proc)


@contextlib.contextmanager
def tether_serve(
    url: str,
    workdir: Path,
    *,
    workers: int = 1,
    concurrency: int = 10,
    lease: float = 2.0,
    worker_processes: int = 0,
    leaders: dict[str, int] | None = None,
) -> Iterator[str]:
    """``tether serve`` on the run store ``url``; its base URL.

    ``workers`` in-process workers; ``worker_processes`` separate ``tether worker``
    processes beside it (with ``workers=0``, the server only answers HTTP).
    ``leaders`` gets the pid of each process started (each leads its own
    process group), by name, for :class:`_cpu.CpuMeter`.
    """
    leaders = {} if leaders is None else leaders
    port = free_port()
    command = [
        *(sys.executable, "-m", "tether", "serve", "--config", str(PROJECT), "--url", url),
        *("--port", str(port), "--workers", str(workers), "--concurrency", str(concurrency)),
        *("--lease", str(lease), "--log-level", "warning"),
        "--no-auth",  # a loopback benchmark; langgraph dev has no authentication either
    ]
    base = f"http://127.0.0.1:{port}"
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(
                _server(command, f"{base}/ok", workdir, "tether-serve", 60)
            )
        except Unavailable as exc:
            raise RuntimeError(f"tether serve did not start: {exc}") from exc
        leaders["tether serve"] = server.pid
        for i in range(worker_processes):
            worker = stack.enter_context(_worker(url, workdir, i, concurrency, lease))
            leaders["tether worker" if worker_processes == 1 else f"tether worker {i}"] = worker.pid
        yield base


@contextlib.contextmanager
def _worker(
    url: str, workdir: Path, index: int, concurrency: int, lease: float
) -> Iterator[subprocess.Popen[bytes]]:
    """One ``tether worker`` process for the bench project (it has no port to wait on)."""
    command = [
        *(sys.executable, "-m", "tether", "worker", "--config", str(PROJECT), "--url", url),
        *("--concurrency", str(concurrency), "--lease", str(lease)),
    ]
    with (workdir / f"tether-worker-{index}.log").open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True
        )
    try:
        yield proc
    finally:
        _stop(proc)


@contextlib.contextmanager
def langgraph_dev(workdir: Path, leaders: dict[str, int] | None = None) -> Iterator[str]:
    """``langgraph dev`` (in-memory) on the bench project; its base URL, or :class:`Unavailable`.

    ``leaders`` gets its process group's leader pid (see :func:`tether_serve`).
    """
    cli = shutil.which("langgraph") or str(Path(sys.executable).with_name("langgraph"))
    if not Path(cli).exists():
        raise Unavailable(
            "the LangGraph CLI is not installed (in a virtualenv of its own: "
            "python -m venv .bench && .bench/bin/pip install -e '.[all,bench]'; see "
            "bench/server_throughput.py)"
        )
    try:
        import langgraph_api  # noqa: F401  (the in-memory server `langgraph dev` runs)
    except ImportError as exc:
        raise Unavailable(
            f"langgraph dev needs langgraph-cli[inmem] ({exc.name} is missing)"
        ) from exc
    # It reads the graphs' paths relative to its working directory and keeps its
    # state (.langgraph_api/) there: it runs on a copy of the project.
    project = workdir / "langgraph-dev-project"
    shutil.copytree(PROJECT.parent, project, ignore=shutil.ignore_patterns("__pycache__"))
    port = free_port()
    command = [
        *(cli, "dev", "--no-browser", "--no-reload", "--port", str(port)),
        *("--config", str(project / PROJECT.name)),
    ]
    base = f"http://127.0.0.1:{port}"
    with _server(command, f"{base}/ok", project, "langgraph-dev", 120) as server:
        if leaders is not None:
            leaders["langgraph dev"] = server.pid
        yield base
