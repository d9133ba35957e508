"""Every bad input to open_checkpointer gets its own clear error."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tether import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
    MissingRedisModuleError,
    open_checkpointer,
    open_checkpointer_sync,
)
from tether.testing.services import free_port


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://localhost/db", "unknown checkpointer URL scheme 'mysql'"),
        ("mongodb://localhost", "supported schemes are memory://, sqlite://"),
        ("", "non-empty string"),
        ("just-a-path.db", "has no scheme"),
        ("sqlite://", "names no database file"),
        ("sqlite://host/file.db", "has a host part"),
        ("postgresql:///dbname", "names no host"),
        ("redis://", "names no host"),
        ("redis://localhost:99999", "bad port"),
    ],
)
async def test_malformed_urls_are_refused_by_name(url: str, expected: str) -> None:
    with pytest.raises(ConfigurationError, match=expected):
        async with open_checkpointer(url):
            pass


async def test_sqlite_in_a_missing_directory_names_the_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/nowhere/file.db"
    with pytest.raises(ConfigurationError, match=r"nowhere.* does not exist"):
        async with open_checkpointer(url):
            pass
    assert not (tmp_path / "nowhere").exists()


async def test_unknown_option_names_backend_and_accepted_options() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown option\(s\) for memory: pool"):
        async with open_checkpointer("memory://", pool=3):
            pass


async def test_unknown_postgres_option(servers: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match="accepted: connect_timeout, max_size, min_size"):
        async with open_checkpointer(servers["postgres"], poolsize=3):
            pass


async def test_unreachable_postgres_names_host_and_port() -> None:
    port = free_port()
    url = f"postgresql://postgres:s3cret@127.0.0.1:{port}/db"
    with pytest.raises(BackendUnavailableError, match=f"PostgreSQL at 127.0.0.1:{port}") as info:
        async with open_checkpointer(url, connect_timeout=2):
            pass
    assert "s3cret" not in str(info.value), "the password must not leak into the message"


async def test_unreachable_redis_names_host_and_port() -> None:
    port = free_port()
    with pytest.raises(BackendUnavailableError, match=f"Redis at 127.0.0.1:{port}"):
        async with open_checkpointer(f"redis://127.0.0.1:{port}", connect_timeout=2):
            pass


async def test_redis_without_modules_names_both_missing(servers: dict[str, str]) -> None:
    with pytest.raises(MissingRedisModuleError, match="lacks the RediSearch and RedisJSON modules"):
        async with open_checkpointer(servers["redis_bare"]):
            pass


# The module of tether's saver for each backend, which imports the driver.
SAVER_MODULES = {
    "postgres": "tether.checkpointing._postgres",
    "redis": "tether.checkpointing.redis",
}


@pytest.mark.parametrize(
    ("url_key", "driver", "extra"),
    [("postgres", "psycopg", "postgres"), ("redis", "redis", "redis")],
)
async def test_missing_driver_names_the_extra(
    url_key: str,
    driver: str,
    extra: str,
    servers: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A None entry in sys.modules makes `import driver` raise ImportError, exactly as
    # on a machine where the extra was never installed.
    for name in [m for m in sys.modules if m == driver or m.startswith(f"{driver}.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, driver, None)
    for name in [m for m in sys.modules if m.startswith(f"langgraph.checkpoint.{url_key}")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, SAVER_MODULES[url_key], raising=False)
    with pytest.raises(MissingDependencyError, match=rf"pip install 'tether\[{extra}\]'"):
        async with open_checkpointer(servers[url_key]):
            pass


def test_sync_twin_raises_the_same_errors() -> None:
    with (
        pytest.raises(ConfigurationError, match="unknown checkpointer URL scheme"),
        open_checkpointer_sync("ftp://x"),
    ):
        pass


async def test_sync_method_on_the_savers_own_loop_says_what_to_use(tmp_path: Path) -> None:
    async with open_checkpointer(f"sqlite:///{tmp_path}/x.db") as saver:
        with pytest.raises(asyncio.InvalidStateError, match=r"await adelete_for_runs\(\) instead"):
            saver.delete_for_runs(["r1"])
