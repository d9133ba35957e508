"""``tether audit verify`` on the durable backends: clean chains pass, an edited row is named."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring, spec
from tests.store.raw_steps import RawSteps
from tether.cli import build_parser, main
from tether.store import store_for


def _prefix(backend: Backend) -> list[str]:
    return ["--key-prefix", backend.key_prefix] if backend.key_prefix else []


def test_verify_names_the_thread_and_step_where_the_chain_breaks(
    durable_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = durable_backend

    async def write(edit: bool) -> None:
        async with backend.open(encryption=False) as saver:
            store = store_for(saver)
            if not edit:
                for thread in ("a", "b"):
                    for i in range(3):
                        await store.append_step(thread, {"n": i})
                return
            text = json.dumps({"n": "changed"}, separators=(",", ":"))
            await RawSteps(backend, saver).set_text("b", 1, text)

    asyncio.run(write(edit=False))
    assert main(["audit", "verify", "--url", backend.url, *_prefix(backend)]) == 0
    out = capsys.readouterr().out
    assert "thread 'a': ok, 3 step(s)" in out
    assert "2 thread(s) checked, 0 broken chain(s)" in out

    asyncio.run(write(edit=True))
    code = main(["audit", "verify", "--url", backend.url, "--quiet", *_prefix(backend)])
    out = capsys.readouterr().out
    assert code == 1
    assert "thread 'b': BROKEN at step 1: its content does not match its digest" in out
    assert "thread 'a'" not in out  # --quiet prints only broken chains

    code = main(["audit", "verify", "--url", backend.url, "--thread", "a", *_prefix(backend)])
    assert code == 0
    assert "1 thread(s) checked, 0 broken chain(s)" in capsys.readouterr().out


def test_verify_reads_an_encrypted_store_with_the_ring_from_the_environment(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/chain.db"
    backend = Backend("sqlite", url)

    async def write() -> None:
        async with backend.open(encryption=ring("k")) as saver:
            await store_for(saver).append_step("t", {"secret": "x"})

    asyncio.run(write())
    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", spec("k"))
    assert main(["audit", "verify", "--url", url]) == 0
    assert "thread 't': ok, 1 step(s)" in capsys.readouterr().out


def test_the_audit_group_takes_commands_from_several_modules() -> None:
    parser = build_parser()
    args = parser.parse_args(["audit", "verify", "--url", "memory://"])
    assert args.audit_command == "verify"
    with pytest.raises(SystemExit):
        parser.parse_args(["audit"])  # an action is required
