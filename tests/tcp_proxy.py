"""A TCP proxy a test can cut: a database that goes away for one process, not for the suite.

Connections to the proxy are relayed to ``target``; :meth:`TcpProxy.cut` closes
every relayed connection and the listening socket, so the process behind it
sees its server gone (connections reset, new ones refused) while the real
server keeps serving every other test.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


class TcpProxy:
    """Relays ``127.0.0.1:<port>`` to ``host:port`` until :meth:`cut`."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._cut:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def cut(self) -> None:
        """Close the listener and every relayed connection (RST, as a crash does)."""
        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, []
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
                # shutdown() first: close() alone would leave a pump's blocked recv()
                # holding the socket open, a connection that answers nothing.
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def url(self, url: str) -> str:
        """``url`` with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")
        auth = netloc[0] + "@" if netloc[1] else ""
        return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{self.port}"))


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def proxied(url: str) -> Iterator[TcpProxy]:
    """A :class:`TcpProxy` to ``url``'s server, cut on exit if it was not already."""
    parts = urlsplit(url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    try:
        yield proxy
    finally:
        proxy.cut()
