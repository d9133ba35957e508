"""Servers for benchmarks: reuse the test command's, or start throwaway ones."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from tether.testing.services import ENV_POSTGRES, ENV_REDIS, Services


@contextlib.contextmanager
def bench_servers() -> Iterator[dict[str, str]]:
    """URLs for postgres and redis, started here unless the environment names them."""
    if os.environ.get(ENV_POSTGRES) and os.environ.get(ENV_REDIS):
        yield {"postgres": os.environ[ENV_POSTGRES], "redis": os.environ[ENV_REDIS]}
        return
    with Services() as services:
        services.start_postgres()
        services.start_redis()
        yield dict(services.urls)


@contextlib.contextmanager
def bench_postgres() -> Iterator[str]:
    """A PostgreSQL server URL: the test command's, or a throwaway one started here."""
    if os.environ.get(ENV_POSTGRES):
        yield os.environ[ENV_POSTGRES]
        return
    with Services() as services:
        yield services.start_postgres()
