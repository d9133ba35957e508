"""A database on another host, simulated: a TCP relay that delays each direction.

Benchmarks run client and server on one machine, where a round trip costs
tens of microseconds; in production the database is a network hop away and
a round trip costs a fraction of a millisecond or more. ``--latency-ms`` of
``step_overhead.py`` puts this relay between the client and the server: every
chunk of bytes is forwarded ``delay`` seconds after it arrived, in order, in
both directions (a round trip gains twice the delay).

The relay runs in a process of its own, so its work does not count against
the benchmark's process. Run alone: ``python bench/_latency.py HOST PORT
DELAY_MS`` prints the port it listens on, then relays until killed.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

__all__ = ["delayed_url"]


def _pipe(source: socket.socket, target: socket.socket, delay: float) -> None:
    """Forward what ``source`` receives to ``target``, each chunk ``delay`` s after it came.

    Threads and ``time.sleep`` rather than an event loop, whose timers wait
    at least a millisecond.
    """
    chunks: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

    def send() -> None:
        while True:
            due, data = chunks.get()
            if not data:
                break
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                target.sendall(data)
            except OSError:
                break
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    threading.Thread(target=send, daemon=True).start()
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            chunks.put((time.monotonic() + delay, data))
    chunks.put((0.0, b""))


def _serve(host: str, port: int, delay: float) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        server = socket.create_connection((host, port))
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pipe, args=(client, server, delay), daemon=True).start()
        threading.Thread(target=_pipe, args=(server, client, delay), daemon=True).start()


@contextlib.contextmanager
def delayed_url(url: str, delay_ms: float) -> Iterator[str]:
    """``url`` (PostgreSQL or Redis) reached through a relay adding ``delay_ms`` each way."""
    if delay_ms <= 0:
        yield url
        return
    parts = urlsplit(url)
    relay = subprocess.Popen(
        [sys.executable, __file__, parts.hostname or "127.0.0.1", str(parts.port), str(delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert relay.stdout is not None
        port = int(relay.stdout.readline())
        netloc = parts.netloc.rsplit(":", 1)[0] + f":{port}"
        yield urlunsplit(parts._replace(netloc=netloc))
    finally:
        relay.kill()
        relay.wait()


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1000)
