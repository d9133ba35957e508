"""tether's long-running processes (`tether serve`, `tether worker`) run on uvloop."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import uvloop

from tether.cli._event_loop import loop_factory, run


def test_run_executes_on_uvloop_where_it_is_installed() -> None:
    async def which_loop() -> type[asyncio.AbstractEventLoop]:
        return type(asyncio.get_running_loop())

    assert loop_factory() is uvloop.new_event_loop
    assert issubclass(run(which_loop()), uvloop.Loop)


def test_serve_picks_uvloop_and_httptools() -> None:
    """uvicorn's "auto" choices, as `tether serve` configures them, resolve to the C ones."""
    code = (
        "import uvicorn\n"
        "from uvicorn.config import Config\n"
        "c = Config(app=lambda *a: None, loop='auto', http='auto')\n"
        "c.load()\n"
        "print(c.http_protocol_class.__name__)\n"
        "print(c.get_loop_factory()().__class__.__module__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["HttpToolsProtocol", "uvloop"], out
