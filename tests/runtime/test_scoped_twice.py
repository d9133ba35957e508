"""``Runtime.scoped`` of a scoped runtime acts for the new tenant on the same open store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.runtime import Runtime, ThreadNotFoundError


async def test_a_scoped_runtime_scopes_again(tmp_path: Path) -> None:
    async with Runtime(f"sqlite:///{tmp_path / 'runtime.db'}") as rt:
        a = rt.scoped("a")
        b = a.scoped("b")
        thread = await b.create_thread()
        assert (await b.get_thread(thread.thread_id)).tenant_id == "b"
        with pytest.raises(ThreadNotFoundError):
            await a.get_thread(thread.thread_id)
        with pytest.raises(ThreadNotFoundError):
            await rt.get_thread(thread.thread_id)
