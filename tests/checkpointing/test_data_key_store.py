"""A data-key store at its own URL: a full copy of the database cannot decrypt an erased thread.

With ``data_keys_url`` the threads' wrapped data keys live in a second store,
so the checkpointer's database holds only ciphertext. A full raw copy of that
database (every row of every table, every key of the prefix) taken before an
erasure and restored afterwards brings the erased thread's ciphertext back, but
not its key: nothing of it opens with the current key ring, while the other
threads still read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.backends import Backend, fresh_backend, fresh_postgres_database
from tests.checkpointing.encryption_helpers import CANARY, build_graph, graph_config, ring, spec
from tests.checkpointing.encryption_helpers import graph_input as first_input
from tests.checkpointing.raw_copies import restore_all, take_copy
from tests.checkpointing.shredding_helpers import ERASED, conf, reads_of, seed_thread
from tether import open_checkpointer
from tether.checkpointing import ErasedDataKeyError
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.rotation import rotate_keys
from tether.errors import ConfigurationError
from tether.store import store_for
from tether.store._data_keys import THREAD_KEY_KIND, key_record, load_data_key

# (checkpointer backend, data-key store backend): every main backend, keys on SQLite and
# PostgreSQL (an in-memory checkpointer keeps its keys in memory too).
_PAIRS = [
    ("memory", "memory"),
    ("sqlite", "sqlite"),
    ("sqlite", "postgres"),
    ("postgres", "sqlite"),
    ("postgres", "postgres"),
    ("redis", "sqlite"),
    ("redis", "postgres"),
]


@dataclass
class Stores:
    """The test's checkpointer backend and the URL of its data-key store."""

    main: Backend
    keys_url: str

    def open(self, **extra: Any) -> Any:
        return self.main.open(encryption=ring("k1"), data_keys_url=self.keys_url, **extra)


def _keys_url(name: str, servers: dict[str, str], tmp_path: Path) -> Iterator[str]:
    if name == "memory":
        yield "memory://"
    elif name == "sqlite":
        yield f"sqlite:///{tmp_path / 'keys.db'}"
    else:
        with fresh_postgres_database(servers["postgres"]) as url:
            yield url


def _stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    main, keys = request.param
    servers = request.getfixturevalue("servers") if {main, keys} - {"memory", "sqlite"} else {}
    with fresh_backend(main, servers, tmp_path) as backend:
        for url in _keys_url(keys, servers, tmp_path):
            yield Stores(backend, url)


def _ids(pairs: list[tuple[str, str]]) -> list[str]:
    return [f"{main}-keys_on_{keys}" for main, keys in pairs]


@pytest.fixture(params=_PAIRS, ids=_ids(_PAIRS))
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    yield from _stores(request, tmp_path)


@pytest.fixture(params=_PAIRS[1:], ids=_ids(_PAIRS[1:]))
def durable_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """The pairs whose checkpointer keeps its data across opens."""
    yield from _stores(request, tmp_path)


async def _cannot_read(saver: Any, thread_id: str) -> None:
    store = store_for(saver)
    with pytest.raises(ErasedDataKeyError, match=ERASED):
        await saver.aget_tuple(conf(thread_id))
    with pytest.raises(ErasedDataKeyError, match=rf"record 'tool' '{thread_id}\|refund'"):
        await store.get("tool", f"{thread_id}|refund")
    with pytest.raises(ErasedDataKeyError, match=rf"step 0 of thread '{thread_id}'"):
        await store.steps(thread_id)


async def _key_held(store: Any, thread_id: str) -> tuple[bool, bool]:
    """Whether (the checkpointer's store, the data-key store) hold the thread's key."""
    keys = store.key_records
    assert keys is not None
    return (
        await store.driver.get(THREAD_KEY_KIND, key_record(thread_id)) is not None,
        await keys.driver.get(THREAD_KEY_KIND, key_record(thread_id)) is not None,
    )


async def test_a_full_copy_of_the_database_taken_before_erasure_cannot_decrypt_the_thread(
    stores: Stores,
) -> None:
    async with stores.open() as saver:
        await seed_thread(saver, "gone")
        await seed_thread(saver, "kept")
        store = store_for(saver)
        assert await _key_held(store, "gone") == (False, True)
        kept_before = await reads_of(saver, "kept")
        copied = await take_copy(stores.main, saver)  # every row, of every table

        await saver.adelete_thread("gone")  # what `tether erase` does to each thread
        assert await _key_held(store, "gone") == (False, False)
        assert await _key_held(store, "kept") == (False, True)
        assert await restore_all(stores.main, saver, copied) > 6
        # The whole database is back as it was, the erased thread's key is not.
        assert await saver.inner.aget_tuple(conf("gone")) is not None
        await _cannot_read(saver, "gone")
        assert await reads_of(saver, "kept") == kept_before

    if stores.main.name != "memory":  # another process, with the same ring and key store
        async with stores.open() as other:
            await _cannot_read(other, "gone")
            assert await reads_of(other, "kept") == kept_before


async def test_a_thread_written_again_after_erasure_gets_a_new_key(stores: Stores) -> None:
    async with stores.open() as saver:
        store = store_for(saver)
        await seed_thread(saver, "t")
        first = await store.data_key("t")
        await saver.adelete_thread("t")
        await seed_thread(saver, "t")
        second = await store.data_key("t")
        assert first is not None
        assert second is not None
        assert second.key_id != first.key_id
        assert await _key_held(store, "t") == (False, True)
        assert (await reads_of(saver, "t"))[1].value == {"card": CANARY}


async def test_rotation_rewraps_the_keys_in_the_key_store(stores: Stores) -> None:
    async with stores.open() as saver:
        await seed_thread(saver, "a")
        await seed_thread(saver, "b")
        before = [await reads_of(saver, t) for t in ("a", "b")]
        assert isinstance(saver, EncryptedSaver)
        report = await rotate_keys(EncryptedSaver(saver.inner, ring("k2", "k1")))
        assert report.data_keys == 2
        assert report.threads_done == 2
        again = await rotate_keys(EncryptedSaver(saver.inner, ring("k2", "k1")))
        assert (again.rewrapped, again.data_keys) == (0, 0)
        # The old key is gone from the ring: the keys were rewrapped where they live.
        rotated = EncryptedSaver(saver.inner, ring("k2"))
        assert [await reads_of(rotated, t) for t in ("a", "b")] == before


async def test_keys_kept_in_the_database_before_the_key_store_still_read_rotate_and_erase(
    durable_stores: Stores,
) -> None:
    """Migration: a key the database holds is read where it is; new threads' keys go apart."""
    stores = durable_stores
    async with stores.main.open(encryption=ring("k1")) as saver:
        await seed_thread(saver, "old")
        before = await reads_of(saver, "old")
    async with stores.open() as saver:
        store = store_for(saver)
        assert await reads_of(saver, "old") == before
        old_key = await store.data_key("old")
        await store.append_step("old", {"kind": "more"})  # written under the same key
        assert await store.data_key("old") == old_key
        assert await _key_held(store, "old") == (True, False)
        await seed_thread(saver, "new")
        assert await _key_held(store, "new") == (False, True)

        report = await rotate_keys(EncryptedSaver(saver.inner, ring("k2", "k1")))
        assert report.data_keys == 2  # one where it was, one in the key store
        rotated = EncryptedSaver(saver.inner, ring("k2"))
        assert (await reads_of(rotated, "old"))[1] == before[1]

        copied = await take_copy(stores.main, saver)
        await saver.adelete_thread("old")
        assert await _key_held(store, "old") == (False, False)
        # A copy taken while the key was still in the database holds it (documented).
        await restore_all(stores.main, saver, copied)
        assert (await reads_of(rotated, "old"))[1] == before[1]


async def test_two_writers_creating_a_threads_key_at_once_agree(stores: Stores) -> None:
    async with stores.open() as saver:
        a = store_for(saver)
        b = store_for(EncryptedSaver(saver.inner, ring("k1")))  # another layer, same ring
        keys = await asyncio.gather(*(load_data_key(s, "race", create=True) for s in [a, b] * 4))
        assert len({k.key_id for k in keys if k is not None}) == 1
        assert a.key_records is not None
        assert len(await a.key_records.list(THREAD_KEY_KIND, thread_id="race")) == 1
        assert await a.list(THREAD_KEY_KIND, thread_id="race") == []


async def test_tether_erase_destroys_the_key_in_the_key_store(
    stores: Stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the runtime's erasure, configured by the environment alone."""
    from tests.retention.world import NOW, open_world, seed
    from tether.retention import erase

    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", spec("k1"))
    monkeypatch.setenv("TETHER_DATA_KEYS_URL", stores.keys_url)
    async with open_world(stores.main, tmp_path) as world:
        await seed(world, "gone", "success", days=3)
        await seed(world, "kept", "success", days=3)
        saver = await world.saver()
        store = store_for(saver)
        assert await _key_held(store, "gone") == (False, True)
        copied = await take_copy(stores.main, saver)
        receipt = await erase(world.runtime, thread="gone", now=NOW)
        assert receipt.counts["checkpoints"] == 3
        assert await _key_held(store, "gone") == (False, False)
        assert await _key_held(store, "kept") == (False, True)
        await restore_all(stores.main, saver, copied)
        with pytest.raises(ErasedDataKeyError, match=ERASED):
            await saver.aget_tuple(conf("gone"))
        assert await saver.aget_tuple(conf("kept")) is not None


# -- configuration ------------------------------------------------------------------


async def test_the_environment_names_the_key_store_and_false_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = f"sqlite:///{tmp_path / 'main.db'}"
    monkeypatch.setenv("TETHER_DATA_KEYS_URL", f"sqlite:///{tmp_path / 'keys.db'}")
    async with open_checkpointer(main, encryption=ring("k1")) as saver:
        assert store_for(saver).key_records is not None
    async with open_checkpointer(main, encryption=ring("k1"), data_keys_url=False) as saver:
        assert store_for(saver).key_records is None


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ("sqlite:///{tmp}/keys.db", "only applies with encryption on"),
        ("sqlite:///{tmp}/main.db", "is the checkpointer's own database"),
        ("sqlite:///{tmp}/../{name}/main.db", "is the checkpointer's own database"),
        ("memory://", "must both be in memory or both be durable"),
        ("sqlite:///:memory:", "must both be in memory or both be durable"),
        ("nope://keys", r"data-key store \(data_keys_url.*unknown checkpointer URL scheme"),
        ("sqlite:///{tmp}/missing/keys.db", r"data-key store \(data_keys_url.*does not exist"),
        ("postgresql://tether@127.0.0.1:1/keys", r"data-key store .*cannot be opened"),
        (42, "data_keys_url must be the URL of the data-key store"),
    ],
)
async def test_a_bad_key_store_is_refused_naming_the_problem(
    tmp_path: Path, option: Any, error: str
) -> None:
    main = f"sqlite:///{tmp_path / 'main.db'}"
    url = option.format(tmp=tmp_path, name=tmp_path.name) if isinstance(option, str) else option
    encryption = False if error.startswith("only") else ring("k1")
    with pytest.raises(ConfigurationError, match=error):
        async with open_checkpointer(main, encryption=encryption, data_keys_url=url):
            pass


def test_sync_code_reaches_the_key_store(tmp_path: Path) -> None:
    """open_checkpointer_sync: a sync graph, the sync record store and a sync delete."""
    from tether import open_checkpointer_sync

    main = f"sqlite:///{tmp_path / 'main.db'}"
    keys = f"sqlite:///{tmp_path / 'keys.db'}"
    with open_checkpointer_sync(main, encryption=ring("k1"), data_keys_url=keys) as saver:
        build_graph(saver).invoke(first_input(), graph_config("t"))
        store = store_for(saver)
        store.sync.append_step("t", {"kind": "tool"})
        assert store.key_records is not None
        assert store.key_records.sync.get(THREAD_KEY_KIND, key_record("t")) is not None
        assert store.sync.get(THREAD_KEY_KIND, key_record("t")) is None
        assert store.sync.steps("t") == [{"kind": "tool"}]
        saver.delete_thread("t")
        assert store.key_records.sync.get(THREAD_KEY_KIND, key_record("t")) is None


async def test_an_empty_environment_variable_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_DATA_KEYS_URL", " ")
    with pytest.raises(ConfigurationError, match="TETHER_DATA_KEYS_URL is set but empty"):
        async with open_checkpointer(f"sqlite:///{tmp_path / 'm.db'}", encryption=ring("k1")):
            pass
