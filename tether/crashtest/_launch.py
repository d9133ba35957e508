"""Child processes forked from a preloaded fork server, safe to start from many threads.

The harness forks every child from a multiprocessing fork server that has
imported tether and LangGraph once, so a child costs a fork instead of a new
interpreter. Several boundaries run at the same time, each in its own thread.

``multiprocessing.Process`` is not safe to drive from several threads at once.
``Process.start()`` first reaps every other finished child of the process
(``multiprocessing.process._cleanup`` polls each one). A fork-server child's
exit code arrives as four bytes on a pipe that the fork server writes once and
then closes. When thread B's ``start()`` polls thread A's child at the moment
A's own ``join()`` polls it, both see the pipe readable: one reads the exit
code, the other reads end-of-file, which multiprocessing reports as exit code
255 ("perhaps the forkserver process itself got killed"). Whichever of the two
stores its result last wins, so now and then a child that was killed with
SIGKILL, or one that finished cleanly, came back as 255.

Here every call into a ``Process`` object happens under one lock. Waiting for
a child to end is a ``select`` on its sentinel, which reads nothing, so it
runs outside the lock and children still run in parallel.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["PRELOAD", "run_forked"]

# What the fork server imports once, before it forks any child.
PRELOAD = [
    "tether.crashtest._child",
    "tether.steps",
    "tether.checkpointing._sqlite",
    "tether.checkpointing._postgres",
    "tether.checkpointing.redis",
    "langgraph.prebuilt",
]

_CONTEXT = multiprocessing.get_context("forkserver")

# Guards every use of a multiprocessing.Process object of this module: start()
# polls the other children, so no poll, join or start may run at the same time.
_LOCK = threading.Lock()


def run_forked(
    target: Callable[..., object], args: tuple[Any, ...], *, name: str, timeout: float
) -> int | None:
    """Run ``target(*args)`` in a child forked from the fork server and wait for it.

    Safe to call from several threads at once; the children run in parallel.

    Args:
        target: A module-level function (it is pickled by name).
        args: Its arguments (pickled).
        name: The child's process name.
        timeout: Seconds to wait before the child is killed.

    Returns:
        The child's exit code (negative for a signal, ``-9`` for SIGKILL), or
        ``None`` if it did not end within ``timeout`` and was killed.
    """
    with _LOCK:
        # Only read when the fork server starts, which the first start() does.
        _CONTEXT.set_forkserver_preload(PRELOAD)
        process = _CONTEXT.Process(target=target, name=name, args=args)
        process.start()
        sentinel = process.sentinel
    ended = bool(multiprocessing.connection.wait([sentinel], timeout))
    if not ended:
        with _LOCK:
            process.kill()
        multiprocessing.connection.wait([sentinel])
    with _LOCK:
        # The sentinel is readable: join() returns at once, with the exit code
        # read by this call or already stored by another thread's start().
        process.join()
        code = process.exitcode
        process.close()
    if not ended:
        return None
    if code is None:  # pragma: no cover - join() on an ended child always sets it
        raise RuntimeError(f"child {name!r} ended without an exit code")
    return code
