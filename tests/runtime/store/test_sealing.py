"""With a key ring, what users typed is sealed in the run store, and it fails closed.

Read behind the store's back: no input, value, interrupt, error or event data
appears in clear; a value moved to another row fails authentication; a store
opened without the key refuses sealed values, and one opened with the key
refuses values in clear unless migrating.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.store.actions import claim_one, create
from tests.runtime.store.conftest import GRAPH, add_graph
from tests.runtime.store.raw import copy_value, execute, rows
from tether.checkpointing.encryption import (
    ENV_KEYS,
    KeyRing,
    MissingKeyError,
    PlaintextRefusedError,
    TamperedCiphertextError,
)
from tether.runtime.store import NewEvent, NewRun, Outcome, RunStore, open_run_store

SECRET = "card 4111-1111-1111-1111"
SPEC = KeyRing.generate_spec("k1")
KEYS = KeyRing.from_spec(SPEC)


def _everything(url: str) -> str:
    """Every private column of the store, as one text."""
    found = rows(url, "SELECT input, error, kwargs FROM tether_runs")
    found += rows(url, "SELECT state_values, error, interrupts FROM tether_threads")
    found += rows(url, "SELECT data FROM tether_run_events")
    return repr(found)


# A run's options carry who it is for: its context and configurable values.
OPTIONS = {"context": {"email": SECRET}, "config": {"configurable": {"user": SECRET}}}


async def _run_with_secrets(store: RunStore) -> str:
    run = await create(store, input={"message": SECRET}, kwargs=OPTIONS)
    claim = await claim_one(store)
    await store.append_events(claim.hold, [NewEvent("values", {"messages": [SECRET]})])
    interrupts = {"task": [{"id": "i1", "value": {"question": SECRET}}]}
    await store.finish(
        claim.hold,
        Outcome(
            "interrupted",
            "interrupted",
            values={"messages": [SECRET]},
            interrupts=interrupts,
            error={"error": "E", "message": SECRET},
            thread_error={"error": "E", "message": SECRET},
        ),
    )
    await store.resume_run(run.run_id, {"resume": SECRET})
    return run.run_id


async def test_private_values_are_sealed_and_read_back(store_url: str) -> None:
    async with open_run_store(store_url, encryption=KEYS) as store:
        await store.setup()
        await add_graph(store, GRAPH)
        run_id = await _run_with_secrets(store)
        assert SECRET not in _everything(store_url)
        assert "enc1:" in _everything(store_url)
        run = await store.get_run(run_id)
        assert run.input == {"resume": SECRET}
        assert run.kwargs["context"] == {"email": SECRET}
        assert run.kwargs["config"]["configurable"] == {"user": SECRET}
        thread = await store.get_thread("t1")
        assert thread.values == {"messages": [SECRET]}
        assert thread.interrupts["task"][0]["value"] == {"question": SECRET}
        assert thread.error == {"error": "E", "message": SECRET}
        data = [e.data for e in await store.events(run_id)]
        assert {"messages": [SECRET]} in data


async def test_sealed_values_fail_closed(store_url: str) -> None:
    async with open_run_store(store_url, encryption=KEYS) as store:
        await store.setup()
        await add_graph(store, GRAPH)
        first = await create(store, thread_id="a", input={"message": SECRET})
        second = await create(store, thread_id="b", input={"message": "other"})

    # Without the key: refused, never handed over as ciphertext.
    async with open_run_store(store_url, encryption=False) as plain:
        with pytest.raises(MissingKeyError, match="no encryption key is configured"):
            await plain.get_run(first.run_id)

    # A sealed input copied onto another run fails authentication.
    copy_value(
        store_url, "tether_runs", "input", key="run_id", source=first.run_id, target=second.run_id
    )
    async with open_run_store(store_url, encryption=KEYS) as store:
        with pytest.raises(TamperedCiphertextError):
            await store.get_run(second.run_id)
        # A value written in clear (by hand, or before encryption) is refused ...
        execute(
            store_url,
            f"""UPDATE tether_runs SET input = '{{"message": "forged"}}' """
            f"WHERE run_id = '{second.run_id}'",
        )
        with pytest.raises(PlaintextRefusedError, match="stored in clear"):
            await store.get_run(second.run_id)
    # ... unless migrating a store written without a key.
    async with open_run_store(store_url, encryption=KEYS.with_allow_plaintext()) as store:
        assert (await store.get_run(second.run_id)).input == {"message": "forged"}


async def test_without_a_key_nothing_changes(store_url: str) -> None:
    async with open_run_store(store_url, encryption=False) as store:
        await store.setup()
        await add_graph(store, GRAPH)
        created = await store.create_run(
            NewRun(GRAPH, thread_id="t1", if_not_exists="create", input={"m": SECRET})
        )
        assert SECRET in _everything(store_url)
        assert "enc1:" not in _everything(store_url)
        assert (await store.get_run(created.run.run_id)).input == {"m": SECRET}


async def test_rotation_reseals_every_value_and_the_old_key_can_go(store_url: str) -> None:
    async with open_run_store(store_url, encryption=KEYS) as store:
        await store.setup()
        await add_graph(store, GRAPH)
        run_id = await _run_with_secrets(store)
        before = _everything(store_url)
    new_key = KeyRing.generate_spec("k2")
    both = KeyRing.from_spec(new_key + "," + SPEC)
    async with open_run_store(store_url, encryption=both) as store:
        counts = await store.reseal(batch=2)  # several pages per column
        assert counts.rewrapped >= 8
        assert counts.plaintext == 0
        again = await store.reseal()
        assert (again.rewrapped, again.current) == (0, counts.rewrapped + counts.current)
    assert _everything(store_url) != before
    async with open_run_store(store_url, encryption=KeyRing.from_spec(new_key)) as store:
        assert (await store.get_run(run_id)).input == {"resume": SECRET}
        assert (await store.get_run(run_id)).kwargs["context"] == {"email": SECRET}
        thread = await store.get_thread("t1")
        assert thread.interrupts["task"][0]["value"] == {"question": SECRET}
        assert thread.values == {"messages": [SECRET]}
        assert {"messages": [SECRET]} in [e.data for e in await store.events(run_id)]


def test_tether_keys_rotate_reseals_the_run_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rt.db'}"

    async def write() -> str:
        async with open_run_store(url, encryption=KEYS) as store:
            await store.setup()
            await add_graph(store, GRAPH)
            return await _run_with_secrets(store)

    run_id = asyncio.run(write())
    new_key = KeyRing.generate_spec("k2")
    env = {**os.environ, ENV_KEYS: f"{new_key},{SPEC}"}
    done = subprocess.run(
        [sys.executable, "-m", "tether", "keys", "rotate", "--url", url, "--quiet"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "run store: " in done.stdout
    resealed = done.stdout.split("run store: ")[1]
    assert int(resealed.split()[0]) >= 8, resealed

    async def read() -> Any:
        async with open_run_store(url, encryption=KeyRing.from_spec(new_key)) as store:
            return (await store.get_run(run_id)).input

    assert asyncio.run(read()) == {"resume": SECRET}


async def test_recorded_and_copied_thread_state_is_sealed_for_its_thread(
    store_url: str,
) -> None:
    async with open_run_store(store_url, encryption=KEYS) as store:
        await store.setup()
        await store.create_thread(thread_id="src")
        interrupts = {"task": [{"id": "i1", "value": SECRET}]}
        await store.record_thread_state(
            "src", values={"m": SECRET}, interrupts=interrupts, status="interrupted"
        )
        copy = await store.copy_thread("src", new_thread_id="dst")
        assert SECRET not in _everything(store_url)
        assert (copy.values, copy.interrupts) == ({"m": SECRET}, interrupts)
        found = await store.get_thread("dst")
        assert (found.values, found.interrupts) == ({"m": SECRET}, interrupts)


async def test_run_options_are_bound_to_their_run_and_earlier_clear_ones_still_read(
    store_url: str,
) -> None:
    """Options sealed for one run fail authentication on another; options a version that
    did not seal them wrote in clear are read as they are, with the key set."""
    async with open_run_store(store_url, encryption=KEYS) as store:
        await store.setup()
        await add_graph(store, GRAPH)
        first = await create(store, thread_id="a", kwargs=OPTIONS)
        second = await create(store, thread_id="b", kwargs={"context": {"email": "other"}})
        third = await create(store, thread_id="c")
    copy_value(
        store_url, "tether_runs", "kwargs", key="run_id", source=first.run_id, target=second.run_id
    )
    execute(
        store_url,
        f"""UPDATE tether_runs SET kwargs = '{{"context": {{"email": "older"}}}}' """
        f"WHERE run_id = '{third.run_id}'",
    )
    async with open_run_store(store_url, encryption=KEYS) as store:
        with pytest.raises(TamperedCiphertextError):
            await store.get_run(second.run_id)
        assert (await store.get_run(third.run_id)).kwargs == {"context": {"email": "older"}}
        assert (await store.get_run(first.run_id)).kwargs["context"] == {"email": SECRET}
        counts = await store.reseal()
        assert counts.plaintext >= 1  # the clear options, counted
    async with open_run_store(store_url, encryption=False) as plain:
        with pytest.raises(MissingKeyError, match="no encryption key is configured"):
            await plain.get_run(first.run_id)


async def test_a_cron_s_payload_is_sealed_and_its_runs_too(store_url: str) -> None:
    """A cron's payload is the input and options of every run it creates: sealed, bound to
    the cron, read back to fire, and re-sealed by rotation."""
    from datetime import UTC, datetime, timedelta

    payload = {"input": {"message": SECRET}, **OPTIONS}
    async with open_run_store(store_url, encryption=KEYS) as store:
        await store.setup()
        await add_graph(store, GRAPH)
        cron = await store.create_cron(GRAPH, "* * * * *", payload=payload)
        other = await store.create_cron(GRAPH, "* * * * *", payload={"input": {"m": "x"}})
        assert SECRET not in repr(rows(store_url, "SELECT payload FROM tether_crons"))
        assert (await store.get_cron(cron.cron_id)).payload == payload
        later = datetime.now(UTC) + timedelta(minutes=2)
        due = [c for c in await store.due_crons(later) if c.cron_id == cron.cron_id]
        created = await store.fire_cron(due[0], later)
        assert created is not None
        assert (await store.get_run(created.run.run_id)).input == {"message": SECRET}
        assert SECRET not in _everything(store_url)
        both = KeyRing.from_spec(KeyRing.generate_spec("k2") + "," + SPEC)
    async with open_run_store(store_url, encryption=both) as store:
        assert (await store.reseal()).plaintext == 0
    copy_value(
        store_url,
        "tether_crons",
        "payload",
        key="cron_id",
        source=cron.cron_id,
        target=other.cron_id,
    )
    async with open_run_store(store_url, encryption=both) as store:
        with pytest.raises(TamperedCiphertextError):
            await store.get_cron(other.cron_id)
