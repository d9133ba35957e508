"""A runtime with encryption on stores nothing a user typed in clear, anywhere.

Real workers run with ``TETHER_ENCRYPTION_KEYS``; the run pauses on an
interrupt, is resumed with a person's answer, waits on an approval, is decided
and finishes. Then every row of every table of the database is read behind the
runtime's back: checkpoints, records, step log, runs, threads, events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.runtime.store.raw import every_row
from tests.runtime.workers import PROJECT, Workers
from tether.approvals import get_approval
from tether.checkpointing.encryption import ENV_KEYS, KeyRing, MissingKeyError
from tether.runtime import Runtime
from tether.runtime.project import Project

SECRET_INPUT = "passport X1234567"
SECRET_ANSWER = "my address is 1 Main St"
SECRET_USER = "dana@example.com"  # who the run is for: in its configurable values
SPEC = KeyRing.generate_spec("k1")


@pytest.fixture
async def sealed_runtime(runtime_url: str) -> AsyncIterator[Runtime]:
    keys = KeyRing.from_spec(SPEC)
    graphs = Project.load(PROJECT).graph_ids
    async with Runtime(runtime_url, graphs=graphs, encryption=keys) as rt:
        yield rt


async def test_nothing_a_user_typed_is_stored_in_clear(
    sealed_runtime: Runtime, runtime_url: str, workers: Workers
) -> None:
    rt = sealed_runtime
    workers.start(1, extra_env={ENV_KEYS: SPEC})
    run = await rt.create(
        "pause",
        thread_id="t-sealed",
        input={"trace": [SECRET_INPUT]},
        config={"configurable": {"user_email": SECRET_USER}},
    )
    assert (await rt.wait(run.run_id, timeout=60)).status == "interrupted"
    await rt.resume(run.run_id, {"resume": SECRET_ANSWER})
    waiting = await rt.wait(run.run_id, timeout=60)
    assert waiting.status == "interrupted"
    approval_id = waiting.waiting_on[0].approval_id
    assert approval_id is not None
    shown = await get_approval(await rt.checkpointer(), approval_id)
    await rt.decide(
        "t-sealed", approval_id, "approve", by="dana", args_sha256=shown.request.args_sha256
    )
    done = await rt.wait(run.run_id, timeout=60)
    assert done.status == "success", done

    # The runtime reads it all back ...
    thread = await rt.get_thread("t-sealed")
    assert thread.values is not None
    assert thread.values["trace"][0] == SECRET_INPUT
    assert thread.values["answer"] == "approve"
    events = [e.data for e in await rt.events(run.run_id)]
    assert any(SECRET_ANSWER in repr(d) for d in events)
    # ... and the database holds none of it in clear.
    stored = every_row(runtime_url)
    assert "enc1:" in stored
    assert SECRET_INPUT not in stored
    assert SECRET_ANSWER not in stored
    assert SECRET_USER not in stored
    assert (await rt.get(run.run_id)).kwargs["config"]["configurable"]["user_email"] == SECRET_USER


async def test_a_runtime_without_the_key_does_not_open_a_store_written_with_one(
    runtime_url: str,
) -> None:
    graphs = Project.load(PROJECT).graph_ids
    async with Runtime(runtime_url, graphs=graphs, encryption=KeyRing.from_spec(SPEC)) as rt:
        sealed = await rt.create("three_node", thread_id="t-keyed", input={"trace": ["x"]})
    with pytest.raises(MissingKeyError) as refused:
        async with Runtime(runtime_url, graphs=graphs, encryption=False) as rt:
            await rt.create("three_node", thread_id="t-forgot", input={"trace": [SECRET_INPUT]})
    message = str(refused.value)
    assert f"run {sealed.run_id} is sealed" in message
    assert ENV_KEYS in message
    stored = every_row(runtime_url)
    assert SECRET_INPUT not in stored
    assert "t-forgot" not in stored


async def test_a_run_a_worker_cannot_read_fails_and_the_worker_goes_on(
    runtime_url: str, workers: Workers
) -> None:
    """A run stored in clear before the key was set (no migration mode): not a dead worker."""
    graphs = Project.load(PROJECT).graph_ids
    async with Runtime(runtime_url, graphs=graphs, encryption=False) as rt:
        clear = await rt.create("three_node", thread_id="t-clear", input={"trace": ["c"]})
    async with Runtime(runtime_url, graphs=graphs, encryption=KeyRing.from_spec(SPEC)) as rt:
        sealed = await rt.create("three_node", thread_id="t-sealed", input={"trace": ["s"]})
        workers.start(1, extra_env={ENV_KEYS: SPEC})
        done = await rt.wait(sealed.run_id, timeout=60)
        assert done.status == "success", done
        assert workers.procs[0].poll() is None, workers.log(0)
        assert f"run {clear.run_id} cannot be read; failing it" in workers.log(0)
    # Only the migration mode opens the run that was stored in clear, to show its end.
    ring = KeyRing.from_spec(SPEC, allow_plaintext=True)
    async with Runtime(runtime_url, graphs=graphs, encryption=ring) as rt:
        failed = await rt.get(clear.run_id)
        assert failed.status == "error"
        assert failed.error is not None
        assert failed.error["error"] == "PlaintextRefusedError"
        assert (
            f"Run {clear.run_id} cannot be read, so it was not started" in (failed.error["message"])
        )
        assert (await rt.get_thread("t-clear")).status == "error"
        events = await rt.events(clear.run_id)
        assert [e.kind for e in events][-2:] == ["run.started", "run.finished"]
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
