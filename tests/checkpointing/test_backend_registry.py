"""The backend registry: one entry per backend, found by name or by a saver's class.

The opener, ``store_for``, key rotation and the tests' raw-storage reader all
find a backend here; these tests pin what each asks of it, and the errors for a
backend or saver tether does not serve.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from tests.backends import BACKENDS, Backend
from tests.checkpointing.encryption_helpers import ring
from tests.raw_storage import READERS
from tether.checkpointing import SCHEMES
from tether.checkpointing import _backends as registry
from tether.checkpointing._delegating import DelegatingSaver, innermost
from tether.checkpointing._encrypted import EncryptedSaver
from tether.errors import ConfigurationError, MissingDependencyError
from tether.store import store_for


class CustomSaver(BaseCheckpointSaver[Any]):
    """A third-party saver: no backend of tether's serves it."""


def test_every_backend_has_one_entry_and_every_url_scheme_one_backend() -> None:
    assert tuple(registry.BACKENDS) == BACKENDS
    assert set(SCHEMES.values()) == set(registry.BACKENDS)
    assert set(READERS) == set(registry.BACKENDS)
    for name, entry in registry.BACKENDS.items():
        assert entry.name == name
        assert registry.backend_named(name) is entry


def test_an_unknown_backend_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"unknown backend 'mysql'; tether serves memory, sqlite, postgres or redis$",
    ):
        registry.backend_named("mysql")


@pytest.mark.parametrize("saver", [CustomSaver(), DelegatingSaver(CustomSaver())])
def test_store_for_an_unknown_saver_type_names_it(saver: BaseCheckpointSaver[Any]) -> None:
    assert registry.backend_of(innermost(saver)) is None
    with pytest.raises(
        ConfigurationError,
        match=r"no record store for checkpointer type CustomSaver; open the checkpointer with "
        r"tether.open_checkpointer\(\) \(memory, sqlite, postgres or redis\)",
    ):
        store_for(saver)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_a_saver_is_recognised_by_its_backends_class(
    backend: Backend, encrypted: bool
) -> None:
    async with backend.open(encryption=ring("k1") if encrypted else False) as saver:
        assert isinstance(saver, EncryptedSaver) is encrypted
        entry = registry.backend_of(innermost(saver))
        assert entry is registry.BACKENDS[backend.name]
        if encrypted:
            assert registry.backend_of(saver) is None, "a layer is not a backend's saver"
        driver = store_for(saver).driver
        assert type(driver).__module__ == entry.record_driver.partition(":")[0]


async def test_an_upstream_saver_not_opened_by_tether_is_recognised() -> None:
    upstream = InMemorySaver()
    assert registry.backend_of(upstream) is registry.BACKENDS["memory"]
    store = store_for(upstream)
    await store.insert("model", "k", {"n": 1}, thread_id="t")
    assert [r.value for r in await store.list("model")] == [{"n": 1}]


def _loaded_after(code: str) -> list[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    loaded: list[str] = json.loads(out)
    return loaded


_DRIVERS = ("psycopg", "redis", "langgraph.checkpoint.postgres", "langgraph.checkpoint.redis")


def test_using_one_backend_loads_no_other_backends_driver() -> None:
    loaded = _loaded_after(
        "import asyncio\n"
        "from tether import open_checkpointer\n"
        "from tether.checkpointing._backends import backend_of\n"
        "from tether.store import store_for\n"
        "async def main():\n"
        "    async with open_checkpointer('memory://', encryption=False) as saver:\n"
        "        assert backend_of(saver).name == 'memory'\n"
        "        await store_for(saver).insert('model', 'k', {}, thread_id='t')\n"
        "asyncio.run(main())"
    )
    assert "tether.checkpointing._backends" in loaded
    drivers = [m for m in loaded if any(m == d or m.startswith(d + ".") for d in _DRIVERS)]
    assert drivers == []


@pytest.mark.parametrize(
    ("name", "driver", "hook"),
    [("postgres", "psycopg", "tether.store._postgres"), ("redis", "redis", "tether.store._redis")],
)
def test_a_missing_driver_names_the_extra_for_the_record_store_too(
    name: str, driver: str, hook: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry in sys.modules makes `import driver` raise ImportError, exactly as
    # on a machine where the extra was never installed.
    for module in [m for m in sys.modules if m == driver or m.startswith(f"{driver}.")]:
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setitem(sys.modules, driver, None)
    for module in [m for m in sys.modules if m.startswith(f"langgraph.checkpoint.{name}")]:
        monkeypatch.setitem(sys.modules, module, None)
    savers = (f"tether.checkpointing.{name}", f"tether.checkpointing._{name}")
    for module in [m for m in sys.modules if m.startswith((hook, *savers))]:
        monkeypatch.delitem(sys.modules, module)
    entry = registry.backend_named(name)
    with pytest.raises(MissingDependencyError, match=rf"pip install 'tether\[{name}\]'"):
        entry.record_driver_for(InMemorySaver())


def test_tethers_own_import_errors_are_not_blamed_on_an_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "tether_broken_hook.py"
    broken.write_text("import tether.no_such_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = registry.BackendEntry(
        name="postgres",
        label="PostgreSQL",
        extra="postgres",
        saver_class="tether_broken_hook:Saver",
        opener="tether_broken_hook:open_it",
        record_driver="tether_broken_hook:Driver",
        rotator="tether_broken_hook:Rotator",
    )
    with pytest.raises(ModuleNotFoundError, match=r"tether\.no_such_module") as caught:
        entry.record_driver_for(InMemorySaver())
    assert not isinstance(caught.value, MissingDependencyError)
