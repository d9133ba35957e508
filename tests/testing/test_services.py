"""The throwaway servers start on loopback and are stopped by PID, even after a failure."""

from __future__ import annotations

import os
import signal

import pytest
import redis

from tether.testing.services import Services


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); read its state to be sure it has exited.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_servers_stop_even_when_the_body_fails() -> None:
    class Boom(Exception):
        pass

    pids: list[int] = []
    root = None
    with pytest.raises(Boom), Services() as services:  # noqa: PT012 - the failure is the point
        url = services.start_redis(name="redis")
        assert url.startswith("redis://127.0.0.1:")
        assert redis.Redis.from_url(url).ping()
        pids = [proc.pid for _, proc in services._procs]
        root = services.root
        raise Boom
    assert pids
    assert not any(_alive(pid) for pid in pids)
    assert root is not None
    assert not root.exists(), "the temporary data directory is removed"


def test_bare_redis_has_no_modules() -> None:
    with Services() as services:
        client = redis.Redis.from_url(services.start_redis(modules=False, name="bare"))
        names = {module[b"name"] for module in client.execute_command("MODULE LIST")}
        assert b"search" not in names
        assert b"ReJSON" not in names
        client.close()


def test_stop_escalates_past_sigint() -> None:
    with Services() as services:
        services.start_redis()
        _, proc = services._procs[0]
        # A server that ignores SIGINT must still go: stop() waits, then kills.
        os.kill(proc.pid, signal.SIGSTOP)
        services.stop(timeout=0.5)
        assert proc.poll() is not None
